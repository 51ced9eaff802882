//! What a token may do.

/// Scopes a token may hold (docs/api.md, "Authentication and tenants"). `admin` grants every
/// other; `operate` grants `read` and `review` besides pausing routes, never `send`: an on-call
/// person can stop a vendor and settle what it left without being able to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Send,
    Read,
    Review,
    Operate,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 5] = [
        Scope::Send,
        Scope::Read,
        Scope::Review,
        Scope::Operate,
        Scope::Admin,
    ];

    /// Whether a token holding this scope may do what `wanted` allows.
    pub fn grants(self, wanted: Scope) -> bool {
        self == wanted
            || self == Scope::Admin
            || (self == Scope::Operate && matches!(wanted, Scope::Read | Scope::Review))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Send => "send",
            Scope::Read => "read",
            Scope::Review => "review",
            Scope::Operate => "operate",
            Scope::Admin => "admin",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scope;

    #[test]
    fn operate_reads_and_reviews_but_never_sends() {
        use Scope::{Admin, Operate, Read, Review, Send};
        let granted: Vec<Scope> = Scope::ALL
            .into_iter()
            .filter(|wanted| Operate.grants(*wanted))
            .collect();
        assert_eq!(granted, [Read, Review, Operate]);
        assert!(Scope::ALL.into_iter().all(|wanted| Admin.grants(wanted)));
        assert!(!Review.grants(Operate) && !Send.grants(Read));
    }
}
