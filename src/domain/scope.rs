//! What a token may do.

/// Scopes a token may hold (docs/api.md, "Authentication and tenants"). `admin` implies every other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Send,
    Read,
    Review,
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Send, Scope::Read, Scope::Review, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Send => "send",
            Scope::Read => "read",
            Scope::Review => "review",
            Scope::Admin => "admin",
        }
    }
}
