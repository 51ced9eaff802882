//! The inbox: upstream CloudEvents in, notifications out, each event at most once.
//!
//! A configured mapping (`[events."Type"]`) turns an event's `type` into one or more
//! notifications: channel, route and delivery as configured, recipient, metadata and content
//! rendered from the event by herald's templates (its `data` at the top, as `data` is on
//! `POST /v1/notifications`, so one template serves both; its attributes under `event`).
//! Rendering is strict: a missing variable is an error that names it.
//!
//! (`tenant`, `source`, `id`) is recorded in the same transaction as the notifications, with a
//! unique key that decides races ([`Notifications::receive_event`]): a repeat creates nothing and
//! answers the notifications the first one created. Events come over HTTP
//! (`POST /v1/events`, in `api`) or from NATS JetStream ([`nats`]).

pub mod nats;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::config::EventMapping;
use crate::domain::{
    Channel, CloudEvent, FieldError, NotificationId, NotificationRequest, Routing, Templates,
    TraceParent,
};
use crate::store::{InboxOutcome, NewInboxEvent, Store, StoreError};

/// What the inbox did with an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// New: these notifications were committed, in mapping order.
    Created(Vec<NotificationId>),
    /// Received before: nothing was stored; the notifications the first one created.
    Duplicate(Vec<NotificationId>),
}

/// Why an event was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// The event cannot become notifications: no mapping for its type, data a mapping cannot
    /// render, a rendered recipient that is not one. Sending it again changes nothing.
    #[error("{0}")]
    Invalid(Rejected),
    /// The database failed; the event may be sent again.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An event refused for good, naming what is wrong with it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Rejected {
    /// A short, stable reason for metrics: `attribute`, `unmapped`, `mapping`, `route` (its
    /// mapping names a route its sender may not send through).
    pub reason: &'static str,
    /// The attribute, data field or notification field at fault.
    pub field: String,
    pub message: String,
}

impl Rejected {
    /// Every `reason`.
    pub const REASONS: [&str; 4] = ["attribute", "unmapped", "mapping", "route"];

    pub fn attribute(err: FieldError) -> Rejected {
        Rejected {
            reason: "attribute",
            field: err.field,
            message: err.message,
        }
    }
}

pub struct Inbox {
    store: Arc<dyn Store>,
    routing: Arc<Routing>,
    templates: Arc<Templates>,
    mappings: HashMap<String, Vec<EventMapping>>,
}

impl Inbox {
    /// Checks every mapping against the routes and templates, so that a mapping that could
    /// never produce a notification fails at start-up, naming itself.
    pub fn new(
        store: Arc<dyn Store>,
        routing: Arc<Routing>,
        templates: Arc<Templates>,
        mappings: &BTreeMap<String, Vec<EventMapping>>,
    ) -> anyhow::Result<Inbox> {
        for (event_type, list) in mappings {
            for (i, mapping) in list.iter().enumerate() {
                let at = if list.len() == 1 {
                    format!("events.\"{event_type}\"")
                } else {
                    format!("events.\"{event_type}\"[{i}]")
                };
                check(mapping, &routing, &templates)
                    .map_err(|e| anyhow::anyhow!("config: {at}.{e}"))?;
            }
        }
        Ok(Inbox {
            store,
            routing,
            templates,
            mappings: mappings
                .iter()
                .map(|(t, m)| (t.clone(), m.clone()))
                .collect(),
        })
    }

    /// Turns `event` into notifications for `tenant`, once. `routes` are the routes its
    /// sender's token names (`None`: every route the tenant may use), held to the same rule as
    /// `POST /v1/notifications`.
    ///
    /// Its span links to the trace the event names in CloudEvents' distributed-tracing extension
    /// (`traceparent`), and the notifications are kept with the span's own context (where traces
    /// are exported; else with the extension's), as an enqueue's are.
    #[tracing::instrument(skip_all, fields(otel.name = "inbox event", source = %event.source, id = %event.id, event_type = %event.event_type))]
    pub async fn receive(
        &self,
        tenant: &str,
        routes: Option<&HashSet<String>>,
        event: &CloudEvent,
    ) -> Result<Received, Refusal> {
        let now = OffsetDateTime::now_utc();
        let mut notifications = self
            .notifications(tenant, event, now)
            .map_err(Refusal::Invalid)?;
        let origin = event
            .extensions
            .get("traceparent")
            .and_then(serde_json::Value::as_str)
            .and_then(TraceParent::parse);
        if let Some(origin) = &origin {
            crate::traces::link(&tracing::Span::current(), origin);
        }
        let trace_parent = crate::traces::current_or(origin);
        for n in &mut notifications {
            n.trace_parent = trace_parent.clone();
        }
        for n in &notifications {
            let granted = routes.is_none_or(|r| r.contains(&n.route));
            let admitted = self
                .routing
                .info(&n.route)
                .is_some_and(|i| i.admits(tenant));
            if !(granted && admitted) {
                return Err(Refusal::Invalid(Rejected {
                    reason: "route",
                    field: "route".into(),
                    message: format!(
                        "mapping of `{}`: this sender may not send through route `{}`",
                        event.event_type, n.route
                    ),
                }));
            }
        }
        let outcome = self
            .store
            .receive_event(&NewInboxEvent {
                tenant: tenant.to_owned(),
                source: event.source.clone(),
                id: event.id.clone(),
                notifications: notifications.clone(),
                received_at: now,
            })
            .await?;
        Ok(match outcome {
            InboxOutcome::Created => {
                metrics::counter!("herald_notifications_accepted_total")
                    .increment(notifications.len() as u64);
                Received::Created(notifications.iter().map(|n| n.id).collect())
            }
            InboxOutcome::Duplicate(ids) => {
                metrics::counter!("herald_inbox_duplicates_total").increment(1);
                Received::Duplicate(ids)
            }
        })
    }

    /// The notifications `event` maps to. Rendered before the store is asked whether the event
    /// is new: an event that cannot map is refused the same way however often it comes.
    fn notifications(
        &self,
        tenant: &str,
        event: &CloudEvent,
        now: OffsetDateTime,
    ) -> Result<Vec<crate::domain::Notification>, Rejected> {
        let mappings = self
            .mappings
            .get(&event.event_type)
            .ok_or_else(|| Rejected {
                reason: "unmapped",
                field: "type".into(),
                message: format!(
                    "no mapping for event type `{}` (configure [events.\"{}\"])",
                    event.event_type, event.event_type
                ),
            })?;
        let context = event.template_context().map_err(Rejected::attribute)?;
        mappings
            .iter()
            .map(|mapping| {
                let request = self.request(mapping, &event.event_type, &context)?;
                // A mapping names no attachments, so there are no files to keep.
                request
                    .parse(tenant, &self.routing, &self.templates, now)
                    .map(|(notification, _)| notification)
                    .map_err(|err| Rejected {
                        reason: "mapping",
                        field: err.field,
                        message: format!("mapping of `{}`: {}", event.event_type, err.message),
                    })
            })
            .collect()
    }

    /// The request a mapping makes of an event, as if an upstream had sent it.
    fn request(
        &self,
        mapping: &EventMapping,
        event_type: &str,
        context: &Map<String, Value>,
    ) -> Result<NotificationRequest, Rejected> {
        let render = |what: &str, source: &str| {
            self.templates
                .render_str(&format!("the mapping's `{what}`"), source, context)
                .map_err(|err| Rejected {
                    reason: "mapping",
                    field: err.field,
                    message: format!("mapping of `{event_type}`: {}", err.message),
                })
        };
        let to = render("to", &mapping.to)?.trim().to_owned();
        let mut metadata = Map::new();
        for (key, source) in &mapping.metadata {
            metadata.insert(
                key.clone(),
                render(&format!("metadata.{key}"), source)?.into(),
            );
        }
        let cancellation_key = mapping
            .cancellation_key
            .as_deref()
            .map(|source| render("cancellation_key", source))
            .transpose()?;
        let locale = match &mapping.locale {
            Some(source) => Some(render("locale", source)?.trim().to_owned()),
            None => None,
        }
        .filter(|locale| !locale.is_empty());
        Ok(NotificationRequest {
            channel: mapping.channel.as_str().to_owned(),
            to,
            route: mapping.route.clone(),
            template: Some(mapping.template.clone()),
            data: Some(context.clone()),
            delivery: mapping.delivery.map(|d| d.as_str().to_owned()),
            metadata: (!metadata.is_empty()).then_some(metadata),
            cancellation_key,
            locale,
            ..NotificationRequest::default()
        })
    }
}

/// What start-up checks of one mapping; the error starts with the key at fault.
fn check(mapping: &EventMapping, routing: &Routing, templates: &Templates) -> Result<(), String> {
    if !templates.has(&mapping.template) {
        return Err(format!("template: unknown template `{}`", mapping.template));
    }
    if mapping.channel == Channel::Webhook {
        return Err(
            "channel: a template renders a subject and text, not the JSON payload a \
                    webhook sends; map the event to email, sms or push"
                .to_owned(),
        );
    }
    routing
        .choose(mapping.channel, mapping.route.as_deref())
        .map_err(|e| format!("route: {}", e.message))?;
    templates
        .check_str(&mapping.to)
        .map_err(|e| format!("to: {e}"))?;
    for (key, source) in &mapping.metadata {
        templates
            .check_str(source)
            .map_err(|e| format!("metadata.{key}: {e}"))?;
    }
    for (key, source) in [
        ("cancellation_key", &mapping.cancellation_key),
        ("locale", &mapping.locale),
    ] {
        if let Some(source) = source {
            templates
                .check_str(source)
                .map_err(|e| format!("{key}: {e}"))?;
        }
    }
    Ok(())
}
