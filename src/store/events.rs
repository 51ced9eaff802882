//! The outbox's events: their CloudEvents types and the rows every state change writes in
//! its own transaction.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use uuid::Uuid;

use crate::domain::{Notification, NotificationId, State, TraceParent};

/// CloudEvents `type`s of the outbox (docs/api.md, "Events").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Accepted,
    Delivered,
    Failed,
    Unknown,
    Resolved,
    Cancelled,
    /// The receipt moved forward on a vendor's callback.
    Receipt,
    /// Later evidence contradicted what was recorded: the notification is delivered after all,
    /// may have been delivered twice, or may have been delivered where the record said it was
    /// not (`unknown`), and waits in review.
    Reopened,
    /// An operator paused a route, in every process.
    RoutePaused,
    /// An operator resumed a paused route.
    RouteResumed,
    /// A route's circuit breaker opened in one process: its sends failed in a row.
    CircuitOpened,
    /// A route's circuit breaker closed again in that process: a probe found the vendor working.
    CircuitClosed,
}

impl EventType {
    pub const ALL: [EventType; 12] = [
        EventType::Accepted,
        EventType::Delivered,
        EventType::Failed,
        EventType::Unknown,
        EventType::Resolved,
        EventType::Cancelled,
        EventType::Receipt,
        EventType::Reopened,
        EventType::RoutePaused,
        EventType::RouteResumed,
        EventType::CircuitOpened,
        EventType::CircuitClosed,
    ];

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Accepted => "dev.herald.notification.accepted",
            EventType::Delivered => "dev.herald.notification.delivered",
            EventType::Failed => "dev.herald.notification.failed",
            EventType::Unknown => "dev.herald.notification.unknown",
            EventType::Resolved => "dev.herald.notification.resolved",
            EventType::Cancelled => "dev.herald.notification.cancelled",
            EventType::Receipt => "dev.herald.notification.receipt",
            EventType::Reopened => "dev.herald.notification.reopened",
            EventType::RoutePaused => "dev.herald.route.paused",
            EventType::RouteResumed => "dev.herald.route.resumed",
            EventType::CircuitOpened => "dev.herald.route.circuit_opened",
            EventType::CircuitClosed => "dev.herald.route.circuit_closed",
        }
    }
}

/// An outbox row: the event's stable id and its `data`, fixed when the state changed. A route's
/// event belongs to no tenant (`tenant` is empty) and stands in `notification_id` with a UUID
/// fixed by the route's name: the relay publishes the events of one id in order, so a route's
/// pause is never published after its resume.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    pub id: Uuid,
    pub tenant: String,
    pub notification_id: NotificationId,
    pub event_type: EventType,
    pub data: Value,
    pub created_at: OffsetDateTime,
    /// The trace its notification was enqueued in: the relay's publish links to it, and the
    /// published event carries it (CloudEvents' distributed-tracing extension).
    pub trace_parent: Option<TraceParent>,
}

impl OutboxEvent {
    /// A route's event: `data` says what happened, and holds the route's name as `route`.
    pub fn for_route(route: &str, event_type: EventType, data: Value, now: OffsetDateTime) -> Self {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(format!("herald route {route}"));
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        let mut data = data;
        data["route"] = json!(route);
        OutboxEvent {
            id: Uuid::now_v7(),
            tenant: String::new(),
            notification_id: NotificationId::from_uuid(
                uuid::Builder::from_custom_bytes(bytes).into_uuid(),
            ),
            event_type,
            data,
            created_at: now,
            // A route's event belongs to no one request's trace.
            trace_parent: None,
        }
    }

    /// What the event is about, as its CloudEvent's `subject`: the notification's id, or the
    /// route's name.
    pub fn subject(&self) -> String {
        match self.data.get("route").and_then(Value::as_str) {
            Some(route) if self.tenant.is_empty() => route.to_owned(),
            _ => self.notification_id.to_string(),
        }
    }

    pub fn for_notification(n: &Notification, event_type: EventType, now: OffsetDateTime) -> Self {
        let mut data = json!({
            "id": n.id,
            "state": n.state,
            "certainty": n.certainty,
            // After a failover, the fallback: the route that sent it (or last tried to).
            "route": n.route,
            "metadata": n.metadata,
        });
        if let Some(key) = &n.cancellation_key {
            data["cancellation_key"] = json!(key);
        }
        if let Some(category) = &n.category {
            data["category"] = json!(category);
        }
        if let Some(locale) = &n.content.locale {
            data["locale"] = json!(locale);
        }
        if let Some(at) = n.expires_at.and_then(|at| at.format(&Rfc3339).ok()) {
            data["expires_at"] = json!(at);
        }
        if !n.content.email.attachments.is_empty() {
            data["attachments"] = json!(n.content.email.attachments);
        }
        OutboxEvent {
            id: Uuid::now_v7(),
            tenant: n.tenant.clone(),
            notification_id: n.id,
            event_type,
            data,
            created_at: now,
            trace_parent: n.trace_parent.clone(),
        }
    }
}

impl EventType {
    /// The event a notification's move into `state` writes: one for each final state.
    pub(crate) fn of_final(state: State) -> Option<EventType> {
        match state {
            State::Delivered => Some(EventType::Delivered),
            State::Failed => Some(EventType::Failed),
            State::Unknown => Some(EventType::Unknown),
            State::Cancelled => Some(EventType::Cancelled),
            State::Queued | State::Sending => None,
        }
    }
}
