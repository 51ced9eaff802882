//! A notification: what an upstream asked for (the request), what herald stores and shows (the
//! notification with its attempts), and the rules that turn the first into the second (in
//! `checks`).

use herald_provider::{EmailOptions, Message};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::attachment::NewAttachment;
use super::trace::TraceParent;
use super::values::parse_time;
use super::{AttemptResult, Certainty, Channel, Delivery, NotificationId, SettledBy, State};

mod checks;

pub use checks::{check_metadata_key, parse_channel, parse_recipient};

/// A time as RFC 3339 in herald's range, refused with the form it must take: the `time` crate's
/// own message ("a character literal was not valid") does not say what to send instead. (The
/// error's path names the field.)
fn rfc3339_or_say_so<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<OffsetDateTime>, D::Error> {
    let Some(text) = Option::<String>::deserialize(deserializer)? else {
        return Ok(None);
    };
    parse_time("date-time", &text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(e.message))
}

// `Self::parse` checks every field.
/// A notification to enqueue, as the client sends it. Every field is checked before anything
/// is stored; unknown fields are refused, so that a typo never silently drops content.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationRequest {
    /// `email`, `sms`, `push`, `webhook` or `chat`.
    #[schema(schema_with = channel_schema)]
    pub channel: String,
    /// An email address, an E.164 number, a device token, a webhook URL or a chat channel's id
    /// (Slack's `C0123456789`), by channel.
    #[schema(example = "ada@example.com")]
    pub to: String,
    /// A configured route; defaults to the channel's default route.
    pub route: Option<String>,
    pub subject: Option<String>,
    pub text: Option<String>,
    pub html: Option<String>,
    /// The JSON object a webhook receives.
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    /// Chat: up to 50 layout blocks (Slack's Block Kit), each a JSON object, shown in place of
    /// `text`, which stays required as the plain form (what a phone's notification shows).
    #[schema(value_type = Option<Vec<Object>>, max_items = 50)]
    pub blocks: Option<Value>,
    /// A configured template, rendered with `data`, instead of literal content.
    pub template: Option<String>,
    /// The template's language: its locale for this tag, else for each shorter one (`fr-CA`,
    /// then `fr`), else its default. Only with a template.
    #[schema(example = "fr-CA")]
    pub locale: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub data: Option<Map<String, Value>>,
    /// `at_most_once` or `at_least_once`; defaults to the route's policy.
    #[schema(schema_with = delivery_schema)]
    pub delivery: Option<String>,
    /// Not before this time (RFC 3339).
    #[serde(default, deserialize_with = "rfc3339_or_say_so")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub send_at: Option<OffsetDateTime>,
    /// No attempt starts after this time (RFC 3339): one still queued or waiting for a retry
    /// then ends `failed` with `failure_reason: "expired"`, without a vendor call. Later than
    /// now and than `send_at`; not with `ttl_seconds`.
    #[serde(default, deserialize_with = "rfc3339_or_say_so")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
    /// `expires_at` as seconds from now (1 to 31,536,000).
    #[schema(minimum = 1, maximum = 31_536_000)]
    pub ttl_seconds: Option<u64>,
    /// Up to 50 string pairs, echoed in events.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Map<String, Value>>,
    /// A configured category (`transactional`, `digest`, …). Email in a category recipients may
    /// leave carries a one-click unsubscribe link, and is not sent to who left it.
    #[schema(example = "digest")]
    pub category: Option<String>,
    /// A key several notifications share (one per user flow, say): `POST
    /// /v1/notifications/cancel` cancels every one still queued under it. 1 to 255 printable
    /// ASCII characters.
    #[schema(example = "signup-flow/user-42")]
    pub cancellation_key: Option<String>,
    /// Email: the sender, `address` or `Name <address>`, in place of the route's own; only
    /// addresses and @domains the route's `allowed_from` lists.
    #[schema(example = "Acme Billing <billing@acme.example>")]
    pub from: Option<String>,
    /// Email: `address` or `Name <address>`.
    pub reply_to: Option<String>,
    /// Email: copies; `to`, `cc` and `bcc` together at most 50.
    pub cc: Option<Vec<String>>,
    /// Email: blind copies (in the envelope, never in a header).
    pub bcc: Option<Vec<String>>,
    /// Email: up to 20 tags, name → value, each of ASCII letters, digits, `_` and `-`; only on
    /// routes whose vendor keeps tags.
    #[schema(value_type = Option<HashMap<String, String>>)]
    pub tags: Option<Map<String, Value>>,
    /// Email: up to 20 custom headers, name → value; no line breaks, and not the headers herald
    /// writes itself (From, To, Cc, Bcc, Reply-To, Subject, Date, Message-ID, Content-*, …).
    #[schema(value_type = Option<HashMap<String, String>>)]
    pub headers: Option<Map<String, Value>>,
    /// Email: up to 10 files, together at most the configured `[attachments] max_total_bytes`
    /// (10 MiB unless configured); only on routes whose vendor takes attachments. herald
    /// stores each content once, however many notifications carry it.
    #[schema(max_items = 10)]
    pub attachments: Option<Vec<NewAttachment>>,
}

// `channel` and `delivery` are plain strings here, so that a wrong value gets herald's own error
// naming the field; the document still types them as the `Channel` and `Delivery` enums that
// notifications answer with, so that a generated client has one type for each.
pub(super) fn channel_schema() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name(CHANNEL_SCHEMA)
}

fn delivery_schema() -> utoipa::openapi::Ref {
    utoipa::openapi::Ref::from_schema_name("Delivery")
}

/// The document's name for the channel enum, which the API document registers (the type lives
/// in the provider crate, so it cannot derive a schema itself).
pub const CHANNEL_SCHEMA: &str = "Channel";

/// The `Channel` component: one of `Channel::ALL`.
pub fn channel_component() -> utoipa::openapi::schema::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(Channel::ALL.map(Channel::as_str)))
        .description(Some("The kind of message, and so of recipient."))
        .build()
}

/// What is sent, literal or rendered from a template (whose name and data are kept as asked).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Content {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    /// A chat message's layout blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub blocks: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// The template's locale that was rendered (absent: its default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locale: Option<String>,
    /// `true` when the request asked for a `locale` that no translation of the template serves,
    /// so its default language was sent (`[templates] strict_locales = true` refuses instead);
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub locale_fallback: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub data: Option<Map<String, Value>>,
    /// An email's sender, copies, tags and headers as accepted; empty on other channels.
    #[serde(flatten)]
    pub email: EmailOptions,
}

/// A stored notification, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Notification {
    #[schema(value_type = String, format = Uuid)]
    pub id: NotificationId,
    #[serde(skip)]
    pub tenant: String,
    #[schema(schema_with = channel_schema)]
    pub channel: Channel,
    pub to: String,
    pub route: String,
    pub delivery: Delivery,
    pub state: State,
    /// Set once the notification is final (`null` while `queued` or `sending`).
    pub certainty: Option<Certainty>,
    /// A person closed its review: a `duplicate_possible` delivery they acknowledged, or a
    /// failed one they closed (`not_delivered` + `close`).
    pub acknowledged: bool,
    #[serde(flatten)]
    pub content: Content,
    #[schema(value_type = Object)]
    pub metadata: Map<String, Value>,
    /// The key it is cancelled by together with others, if it was given one.
    pub cancellation_key: Option<String>,
    /// Its category, if it was given one.
    pub category: Option<String>,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub send_at: Option<OffsetDateTime>,
    /// No attempt starts after this time (from `expires_at` or `ttl_seconds`).
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<OffsetDateTime>,
    /// When the next try is due, while `queued`.
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub next_attempt_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: OffsetDateTime,
    /// How many times a person's resend renewed the provider key (see [`Self::provider_key`]).
    #[serde(skip)]
    pub key_epoch: i32,
    /// How many times it moved to its route's fallback; on a fallback it sends under a provider
    /// key of its own.
    pub failovers: i32,
    /// Evidence came for it from outside its dispatcher's step (a late answer to an attempt
    /// whose lease was lost, a vendor's report): every later record holds the record against it.
    #[serde(skip)]
    pub late_evidence: bool,
    /// Set when later evidence contradicted what was recorded and reopened it.
    pub contradiction: Option<Contradiction>,
    /// The trace it was enqueued in: its attempts link to it, its events carry it.
    #[serde(skip)]
    pub trace_parent: Option<TraceParent>,
}

/// Why later evidence reopened a notification, and when. It waits in review (reason
/// `contradicted`) until a person acknowledges it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Contradiction {
    pub why: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: OffsetDateTime,
}

/// One try at handing a notification to its provider. Append-only: a later settlement adds
/// `settled_by` and its evidence but never rewrites what the attempt itself saw.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Attempt {
    pub n: i32,
    pub route: String,
    pub provider_idempotency_key: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: OffsetDateTime,
    /// Its call to the vendor started no later than this, or not at all, and was cut at the
    /// route's timeout: every proof that the vendor did not take it rests on this time.
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub send_deadline: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<OffsetDateTime>,
    pub result: AttemptResult,
    /// For `rejected`: whether the provider refused for good.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permanent: Option<bool>,
    pub provider_ref: Option<String>,
    pub settled_by: Option<SettledBy>,
    /// What the provider's answer (or its absence) showed, and what settled it later.
    #[schema(schema_with = super::evidence::schema_ref)]
    pub evidence: Value,
}

impl Attempt {
    /// The vendor's reference in the answer this attempt's worker read after its lease was lost
    /// (kept as `late_result` evidence), where that answer named one: a message of this
    /// attempt's, whatever its settlement said.
    pub fn late_reference(&self) -> Option<&str> {
        self.evidence["late_result"]["provider_ref"].as_str()
    }

    /// Whether that late answer says the vendor took the message.
    pub fn taken_late(&self) -> bool {
        self.evidence["late_result"]["result"] == "accepted" || self.late_reference().is_some()
    }
}

/// An attempt of a look-alike notification: on the same route with the same stored provider
/// request, so to the same recipient with the same content. Dispatch reads these to attribute
/// messages that a vendor's look-up matched by content.
#[derive(Debug, Clone, PartialEq)]
pub struct Sibling {
    pub notification: NotificationId,
    pub created_at: OffsetDateTime,
    pub attempt: Attempt,
}

/// A person's resolution of a notification under review: the audit record, append-only.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Resolution {
    /// The token's principal.
    pub principal: String,
    /// `delivered`, `not_delivered` or `acknowledged`.
    pub outcome: String,
    /// `resend` or `close`, after `not_delivered`.
    pub then: Option<String>,
    pub note: String,
    #[serde(with = "time::serde::rfc3339")]
    #[schema(value_type = String, format = DateTime)]
    pub at: OffsetDateTime,
    pub state_before: Option<State>,
    pub certainty_before: Option<Certainty>,
    pub state_after: Option<State>,
    pub certainty_after: Option<Certainty>,
    /// A resend insisted on: of a notification that failed for a permanent cause, or past its
    /// expiry (which then holds no more).
    pub forced: bool,
    /// The resend went out under a new provider key: the vendor's idempotency window had
    /// passed, so a wrong "not delivered" may now deliver twice — a risk the person accepted.
    pub key_renewed: bool,
}

impl Notification {
    /// The idempotency key the provider sees: stable per notification (never per attempt), so
    /// every resend can be recognised by a vendor that deduplicates — the notification's UUID.
    /// Only a person's resend past the vendor's window renews it (`key_epoch`), as
    /// `{uuid}-{epoch}`: visible ASCII without dots, which every adapter takes.
    ///
    /// On a fallback route it gains `-f{failovers}`: two routes may share one vendor account,
    /// which would take the fallback's send for a replay of the primary's (and answer with the
    /// primary's refusal, or call it a key reused). On the route it was enqueued for, the key
    /// is the notification's own, so replays there keep working.
    pub fn provider_key(&self) -> String {
        let mut key = self.id.to_string();
        if self.key_epoch != 0 {
            key = format!("{key}-{}", self.key_epoch);
        }
        if self.failovers != 0 {
            key = format!("{key}-f{}", self.failovers);
        }
        key
    }
}

/// What a route's adapter is handed for a notification.
impl From<&Notification> for Message {
    fn from(n: &Notification) -> Message {
        Message {
            notification_id: n.id.to_string(),
            channel: n.channel,
            to: n.to.clone(),
            subject: n.content.subject.clone(),
            text: n.content.text.clone(),
            html: n.content.html.clone(),
            payload: n.content.payload.clone(),
            blocks: n.content.blocks.clone(),
            email: n.content.email.clone(),
            expires_at: n.expires_at,
            // The trace it was enqueued in, passed on; the vendor call puts its own in its place
            // where spans are exported.
            trace_parent: n.trace_parent.as_ref().map(|t| t.as_str().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests;
