//! A person's requery: the vendor asked again about one notification, on demand.

use herald_provider::{Evidence, Message, ProviderKey};
use time::OffsetDateTime;

use super::worker::{LookUp, looked_up};
use super::{Routes, policy};
use crate::store::{Claim, Recorded, Store, StoreError};

/// What a person's requery asked and what it changed.
#[derive(Debug)]
pub struct Requeried {
    /// What the vendor's look-up answered, as evidence.
    pub answer: Evidence,
    /// Whether the answer settled the ambiguity (either way).
    pub settled: bool,
}

/// Why a requery was not made.
#[derive(Debug, thiserror::Error)]
pub enum RequeryRefused {
    #[error("only an `unknown` notification is requeried; this one is {0}")]
    NotUnknown(String),
    #[error("route `{0}` has no outcome query")]
    NoQuery(String),
    #[error(
        "nothing sent on route `{0}` is unsettled for its look-up to settle; an unsettled send on a route it failed over from is for a person to settle"
    )]
    NotHere(String),
    #[error("route `{0}` is not configured in this process")]
    NoRoute(String),
    #[error("the notification changed while it was requeried; read it again")]
    Changed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A person's requery of a notification in review: the route's outcome query, asked now about
/// the notification's stored request and decided by the same policy as reconciliation (a
/// look-alike still settles only what the counts prove), recorded fenced by the generation the
/// person read. An answer that proves nothing is kept as evidence and changes nothing else;
/// one that needs the visibility lag to pass hands the notification back to the dispatcher.
pub async fn requery(
    store: &dyn Store,
    routes: &Routes,
    detail: crate::store::NotificationDetail,
) -> Result<Requeried, RequeryRefused> {
    let n = &detail.notification;
    if n.state != crate::domain::State::Unknown {
        return Err(RequeryRefused::NotUnknown(n.state.to_string()));
    }
    let route = routes
        .get(&n.route)
        .ok_or_else(|| RequeryRefused::NoRoute(n.route.clone()))?;
    if route.capabilities().query_visibility_lag.is_none() {
        return Err(RequeryRefused::NoQuery(n.route.clone()));
    }
    // The look-up speaks only of this route's sends; an ambiguity left on a route it failed
    // over from is for a person to settle.
    let unsettled_here = detail.attempts.iter().any(|a| {
        a.route == n.route
            && a.result == crate::domain::AttemptResult::Ambiguous
            && a.settled_by.is_none()
    });
    if !unsettled_here {
        return Err(RequeryRefused::NotHere(n.route.clone()));
    }
    let message = Message::from(n);
    let key = ProviderKey::new(n.provider_key());
    let request = match detail.request.clone() {
        Some(request) => Ok(request),
        None => route.prepare(&message, &key),
    };
    let claim = Claim::in_review(detail);
    let asked_at = OffsetDateTime::now_utc();
    let result = route.query(&request, &message, &key).await;
    let answer = result.evidence().clone();
    let decision = match looked_up(store, route, &claim, result, asked_at).await? {
        LookUp::Decided(decision) => decision,
        LookUp::Failed(evidence) => {
            policy::still_unknown(serde_json::to_value(&evidence).unwrap_or_default())
        }
        LookUp::Inconclusive(_, record) => policy::still_unknown(record),
    };
    let settled = decision.settle.is_some();
    match store
        .record_in_review(&claim, &decision, OffsetDateTime::now_utc())
        .await?
    {
        Recorded::Applied { .. } => Ok(Requeried { answer, settled }),
        Recorded::Fenced => Err(RequeryRefused::Changed),
    }
}
