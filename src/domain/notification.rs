//! A notification: what an upstream asked for (the request), what herald stores and shows (the
//! notification with its attempts), and the rules that turn the first into the second.

use herald_provider::{Attachment, EmailOptions, Message, PLACEHOLDER_OPEN};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::attachment::{File, NewAttachment};
use super::email::EmailFields;
use super::routing::{RouteInfo, Routing, Templates, locale_tag};

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
use super::trace::TraceParent;
use super::values::{header_safe, parse_time};
use super::{
    AttemptResult, Categories, Certainty, Channel, ChatTarget, Delivery, EmailAddress, FieldError,
    IdempotencyKey, NotificationId, PhoneNumber, PushTarget, SettledBy, State, WebhookUrl,
};

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

const MAX_SUBJECT_BYTES: usize = 998;
/// An email's `text` or `html`, as written or rendered: far more than a person reads (Gmail
/// clips an HTML part past 102 KB), and within every vendor's message limit with room for
/// attachments.
const MAX_EMAIL_PART_BYTES: usize = 200 * 1024;
/// A webhook's `payload`, as JSON.
const MAX_PAYLOAD_BYTES: usize = 200 * 1024;
/// A template's `data`, as JSON: values for placeholders, not documents.
const MAX_TEMPLATE_DATA_BYTES: usize = 64 * 1024;
const MAX_SMS_CHARS: usize = 1600;
const MAX_PUSH_TEXT_BYTES: usize = 4096;
/// Slack's limit for a message's text, in UTF-16 units; longer text it truncates.
const MAX_CHAT_TEXT_CHARS: usize = 40_000;
/// Slack's limit of blocks in one message.
const MAX_CHAT_BLOCKS: usize = 50;
const MAX_ROUTE_BYTES: usize = 64;
const MAX_METADATA_KEYS: usize = 50;
/// A year: an expiry further out is no expiry a sender means.
const MAX_TTL_SECONDS: u64 = 31_536_000;
const MAX_METADATA_KEY_CHARS: usize = 40;
const MAX_METADATA_VALUE_CHARS: usize = 500;

impl NotificationRequest {
    /// Turns a request into a new `queued` notification and the attachment contents to store
    /// with it, or names the first field that is wrong.
    pub fn parse(
        self,
        tenant: &str,
        routing: &Routing,
        templates: &Templates,
        now: OffsetDateTime,
    ) -> Result<(Notification, Vec<File>), FieldError> {
        let channel = parse_channel("channel", &self.channel)?;
        let to = parse_recipient("to", channel, &self.to)?;
        if let Some(route) = &self.route {
            header_safe("route", route, MAX_ROUTE_BYTES)?;
        }
        let (route, route_info) = routing.choose(channel, self.route.as_deref())?;
        let delivery = match &self.delivery {
            None => route_info.delivery,
            Some(d) => Delivery::parse(d).ok_or_else(|| {
                FieldError::new("delivery", "must be at_most_once or at_least_once")
            })?,
        };
        let email = EmailFields {
            from: self.from.as_deref(),
            reply_to: self.reply_to.as_deref(),
            cc: self.cc.as_deref().unwrap_or_default(),
            bcc: self.bcc.as_deref().unwrap_or_default(),
            tags: self.tags.as_ref(),
            headers: self.headers.as_ref(),
        }
        .parse(channel, route, route_info)?;
        let (attachments, files) = self.attachments(channel, route, route_info, routing)?;
        let email = EmailOptions {
            attachments,
            ..email
        };
        let categories = routing.categories();
        let category = self
            .category
            .as_deref()
            .map(|name| categories.parse(name))
            .transpose()?;
        let email = match (&category, channel) {
            (Some(category), Channel::Email) => {
                unsubscribe_headers(email, categories, tenant, &to, category)?
            }
            _ => email,
        };
        let content = Content {
            email,
            ..self.content(channel, templates)?
        };
        if let Some(field) = names_a_placeholder(&content) {
            return Err(FieldError::new(
                field,
                format!("must not hold `{PLACEHOLDER_OPEN}`: herald writes it for attachments"),
            ));
        }
        let now = micros(now);
        let send_at = self.send_at.map(micros);
        let expires_at = self.expiry(now)?.map(micros);
        let metadata = parse_metadata(self.metadata.unwrap_or_default())?;
        let cancellation_key = self
            .cancellation_key
            .as_deref()
            .map(|key| IdempotencyKey::parse("cancellation_key", key))
            .transpose()?
            .map(|key| key.as_str().to_owned());

        let notification = Notification {
            id: NotificationId::new(),
            tenant: tenant.to_owned(),
            channel,
            to,
            route: route.to_owned(),
            delivery,
            state: State::Queued,
            certainty: None,
            acknowledged: false,
            content,
            metadata,
            cancellation_key,
            category,
            send_at,
            expires_at,
            next_attempt_at: Some(send_at.map_or(now, |at| at.max(now))),
            created_at: now,
            updated_at: now,
            key_epoch: 0,
            failovers: 0,
            late_evidence: false,
            contradiction: None,
            trace_parent: None,
        };
        Ok((notification, files))
    }

    /// An email's attachments as kept and their contents; refused on other channels and on a
    /// route whose vendor would drop them.
    fn attachments(
        &self,
        channel: Channel,
        route: &str,
        info: &RouteInfo,
        routing: &Routing,
    ) -> Result<(Vec<Attachment>, Vec<File>), FieldError> {
        let given = self.attachments.as_deref().unwrap_or_default();
        if given.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        if channel != Channel::Email {
            return Err(FieldError::new(
                "attachments",
                format!("is not used on the {channel} channel"),
            ));
        }
        if !info.attachments {
            return Err(FieldError::new(
                "attachments",
                format!("route `{route}`'s vendor cannot take attachments"),
            ));
        }
        routing.attachments().parse(given)
    }

    /// `expires_at`, or `ttl_seconds` from `now`: after now and after `send_at`, or it could
    /// never be sent.
    fn expiry(&self, now: OffsetDateTime) -> Result<Option<OffsetDateTime>, FieldError> {
        let (field, at) = match (self.expires_at, self.ttl_seconds) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "ttl_seconds",
                    "give expires_at or ttl_seconds, not both",
                ));
            }
            (Some(at), None) => ("expires_at", at),
            (None, Some(ttl)) => {
                if !(1..=MAX_TTL_SECONDS).contains(&ttl) {
                    return Err(FieldError::new(
                        "ttl_seconds",
                        format!("must be 1 to {MAX_TTL_SECONDS}"),
                    ));
                }
                ("ttl_seconds", now + Duration::from_secs(ttl))
            }
        };
        if at <= now {
            return Err(FieldError::new(field, "must be later than now"));
        }
        if self.send_at.is_some_and(|send_at| at <= send_at) {
            return Err(FieldError::new(field, "must be later than send_at"));
        }
        Ok(Some(at))
    }

    fn content(&self, channel: Channel, templates: &Templates) -> Result<Content, FieldError> {
        let mut content = Content {
            subject: self.subject.clone(),
            text: self.text.clone(),
            html: self.html.clone(),
            payload: self.payload.clone(),
            blocks: self.blocks.clone(),
            ..Content::default()
        };
        if let Some(name) = &self.template {
            let literal = [
                ("subject", self.subject.is_some()),
                ("text", self.text.is_some()),
                ("html", self.html.is_some()),
                ("payload", self.payload.is_some()),
                ("blocks", self.blocks.is_some()),
            ];
            if let Some((field, _)) = literal.iter().find(|(_, set)| *set) {
                return Err(FieldError::new(*field, "must not be given with a template"));
            }
            if let Some(locale) = &self.locale
                && !locale_tag(locale)
            {
                return Err(FieldError::new(
                    "locale",
                    "must be a language tag such as fr or fr-CA",
                ));
            }
            let data = self.data.clone().unwrap_or_default();
            if json_bytes(&data) > MAX_TEMPLATE_DATA_BYTES {
                return Err(FieldError::new(
                    "data",
                    format!("must be at most {MAX_TEMPLATE_DATA_BYTES} bytes as JSON"),
                ));
            }
            let rendered = templates.render(name, self.locale.as_deref(), &data, channel)?;
            content = Content {
                subject: rendered.subject,
                text: rendered.text,
                html: rendered.html,
                payload: None,
                blocks: None,
                template: Some(name.clone()),
                locale: rendered.locale,
                locale_fallback: rendered.locale_fallback,
                data: Some(data),
                ..Content::default()
            };
        } else if self.data.is_some() {
            return Err(FieldError::new("data", "is only used with a template"));
        } else if self.locale.is_some() {
            return Err(FieldError::new("locale", "is only used with a template"));
        }
        check_content(channel, &content)?;
        Ok(content)
    }
}

/// How long `value` is written as JSON.
fn json_bytes(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// An email's headers with the one-click unsubscribe of `category` added, where recipients may
/// leave it; a request that writes those headers itself is refused, as herald writes them.
fn unsubscribe_headers(
    mut email: EmailOptions,
    categories: &Categories,
    tenant: &str,
    to: &str,
    category: &str,
) -> Result<EmailOptions, FieldError> {
    let recipient = super::suppression_recipient(Channel::Email, to);
    let Some(headers) = categories.headers(tenant, &recipient, category) else {
        return Ok(email);
    };
    for (name, value) in headers {
        if let Some(given) = email.headers.keys().find(|h| h.eq_ignore_ascii_case(name)) {
            return Err(FieldError::new(
                format!("headers.{given}"),
                format!("herald writes it for the category `{category}`"),
            ));
        }
        email.headers.insert(name.to_owned(), value);
    }
    Ok(email)
}

/// The field of an email with attachments that holds a placeholder's opening, if one does: in
/// the message's own text it would be expanded as if the adapter had written it. Rendered text
/// is the template data's doing. (Without attachments nothing is expanded.)
fn names_a_placeholder(content: &Content) -> Option<String> {
    if content.email.attachments.is_empty() {
        return None;
    }
    let holds = |text: &str| text.contains(PLACEHOLDER_OPEN);
    let rendered = |field: &str| match content.template {
        Some(_) => "data".to_owned(),
        None => field.to_owned(),
    };
    for (field, text) in [
        ("subject", &content.subject),
        ("text", &content.text),
        ("html", &content.html),
    ] {
        if text.as_deref().is_some_and(holds) {
            return Some(rendered(field));
        }
    }
    content
        .email
        .headers
        .iter()
        .find(|(_, value)| holds(value))
        .map(|(name, _)| format!("headers.{name}"))
}

/// `t` to the microsecond, as both stores keep it: the answer to a request must match what
/// reads return.
fn micros(t: OffsetDateTime) -> OffsetDateTime {
    t.replace_nanosecond(t.nanosecond() / 1000 * 1000)
        .expect("a truncated nanosecond is in range")
}

/// The channel named `s`; errors name `field` and list the channels.
pub fn parse_channel(field: &str, s: &str) -> Result<Channel, FieldError> {
    Channel::parse(s).ok_or_else(|| {
        let names = Channel::ALL.map(Channel::as_str).join(", ");
        FieldError::new(field, format!("must be one of {names}"))
    })
}

/// A recipient of `channel` in the form herald keeps it; errors name `field`.
pub fn parse_recipient(field: &str, channel: Channel, to: &str) -> Result<String, FieldError> {
    Ok(match channel {
        Channel::Email => EmailAddress::parse(field, to)?.as_str().to_owned(),
        Channel::Sms => PhoneNumber::parse(field, to)?.as_str().to_owned(),
        Channel::Push => PushTarget::parse(field, to)?.as_str().to_owned(),
        Channel::Webhook => WebhookUrl::parse(field, to)?.as_str().to_owned(),
        Channel::Chat => ChatTarget::parse(field, to)?.as_str().to_owned(),
    })
}

/// What each channel needs and refuses. An email subject becomes a mail header and a push
/// subject a title, so both are header-checked.
fn check_content(channel: Channel, c: &Content) -> Result<(), FieldError> {
    let forbid = |field: &str, set: bool| {
        if set {
            Err(FieldError::new(
                field,
                format!("is not used on the {channel} channel"),
            ))
        } else {
            Ok(())
        }
    };
    let require = |field: &str, set: bool| {
        if set {
            Ok(())
        } else {
            Err(FieldError::new(
                field,
                format!("is required on the {channel} channel"),
            ))
        }
    };
    if let Some(subject) = &c.subject {
        header_safe("subject", subject, MAX_SUBJECT_BYTES)?;
    }
    if channel != Channel::Chat {
        forbid("blocks", c.blocks.is_some())?;
    }
    match channel {
        Channel::Email => {
            require("subject", c.subject.is_some())?;
            require("text", c.text.is_some() || c.html.is_some())?;
            for (field, part) in [("text", &c.text), ("html", &c.html)] {
                if part
                    .as_ref()
                    .is_some_and(|p| p.len() > MAX_EMAIL_PART_BYTES)
                {
                    return Err(FieldError::new(
                        field,
                        format!("must be at most {MAX_EMAIL_PART_BYTES} bytes"),
                    ));
                }
            }
            forbid("payload", c.payload.is_some())
        }
        Channel::Sms => {
            forbid("subject", c.subject.is_some())?;
            forbid("html", c.html.is_some())?;
            forbid("payload", c.payload.is_some())?;
            let text = c.text.as_deref().unwrap_or_default();
            require("text", !text.is_empty())?;
            if text.chars().count() > MAX_SMS_CHARS {
                return Err(FieldError::new(
                    "text",
                    format!("must be at most {MAX_SMS_CHARS} characters"),
                ));
            }
            Ok(())
        }
        Channel::Push => {
            forbid("html", c.html.is_some())?;
            forbid("payload", c.payload.is_some())?;
            let text = c.text.as_deref().unwrap_or_default();
            require("text", !text.is_empty())?;
            if text.len() > MAX_PUSH_TEXT_BYTES {
                return Err(FieldError::new(
                    "text",
                    format!("must be at most {MAX_PUSH_TEXT_BYTES} bytes"),
                ));
            }
            Ok(())
        }
        Channel::Webhook => {
            forbid("subject", c.subject.is_some())?;
            forbid("text", c.text.is_some())?;
            forbid("html", c.html.is_some())?;
            match &c.payload {
                Some(payload @ Value::Object(_)) if json_bytes(payload) > MAX_PAYLOAD_BYTES => {
                    Err(FieldError::new(
                        "payload",
                        format!("must be at most {MAX_PAYLOAD_BYTES} bytes as JSON"),
                    ))
                }
                Some(Value::Object(_)) => Ok(()),
                Some(_) => Err(FieldError::new("payload", "must be a JSON object")),
                None => require("payload", false),
            }
        }
        Channel::Chat => {
            forbid("subject", c.subject.is_some())?;
            forbid("html", c.html.is_some())?;
            forbid("payload", c.payload.is_some())?;
            // A phone shows the text, also beside blocks: blank shows nothing.
            let text = c.text.as_deref().unwrap_or_default();
            require("text", !text.trim().is_empty())?;
            // Counted in UTF-16 units, the larger count of "characters" (an emoji is two).
            if text.encode_utf16().count() > MAX_CHAT_TEXT_CHARS {
                return Err(FieldError::new(
                    "text",
                    format!("must be at most {MAX_CHAT_TEXT_CHARS} characters"),
                ));
            }
            match &c.blocks {
                None => Ok(()),
                Some(Value::Array(blocks))
                    if (1..=MAX_CHAT_BLOCKS).contains(&blocks.len())
                        && blocks.iter().all(Value::is_object) =>
                {
                    Ok(())
                }
                Some(_) => Err(FieldError::new(
                    "blocks",
                    format!("must be an array of 1 to {MAX_CHAT_BLOCKS} JSON objects"),
                )),
            }
        }
    }
}

/// A metadata key as enqueue accepts it; the list filter holds its keys to the same rule, so
/// that a filter on a key no notification can carry is refused rather than matching nothing.
pub fn check_metadata_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
        return Err(format!(
            "keys must be 1 to {MAX_METADATA_KEY_CHARS} characters"
        ));
    }
    Ok(())
}

fn parse_metadata(metadata: Map<String, Value>) -> Result<Map<String, Value>, FieldError> {
    if metadata.len() > MAX_METADATA_KEYS {
        return Err(FieldError::new(
            "metadata",
            format!("must have at most {MAX_METADATA_KEYS} keys"),
        ));
    }
    for (key, value) in &metadata {
        let field = format!("metadata.{key}");
        check_metadata_key(key).map_err(|message| FieldError::new(&field, message))?;
        match value {
            Value::String(s) if s.chars().count() <= MAX_METADATA_VALUE_CHARS => {}
            Value::String(_) => {
                return Err(FieldError::new(
                    field,
                    format!("must be at most {MAX_METADATA_VALUE_CHARS} characters"),
                ));
            }
            _ => return Err(FieldError::new(field, "must be a string")),
        }
    }
    Ok(metadata)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use serde_json::json;

    use super::*;
    use crate::domain::routing::{Localized, RouteInfo, Template};

    fn routes() -> Routing {
        let all = RouteInfo {
            channels: Channel::ALL.to_vec(),
            delivery: Delivery::AtMostOnce,
            tenants: None,
            allowed_from: Vec::new(),
            tags: true,
            attachments: true,
            operator: None,
        };
        let mail = RouteInfo {
            channels: vec![Channel::Email],
            delivery: Delivery::AtLeastOnce,
            tenants: None,
            allowed_from: vec!["billing@acme.example".into(), "@news.acme.example".into()],
            tags: false,
            attachments: false,
            operator: None,
        };
        Routing::new(
            BTreeMap::from([("sandbox".into(), all), ("mail".into(), mail)]),
            Channel::ALL
                .iter()
                .map(|c| (*c, "sandbox".to_string()))
                .collect::<HashMap<_, _>>(),
        )
    }

    fn templates() -> Templates {
        Templates::new(BTreeMap::from([(
            "export-ready".to_string(),
            Template {
                subject: Some("Export {{ job }} ready".into()),
                text: Some("Download {{ job }}".into()),
                html: Some("<b>{{ job }}</b>".into()),
                locales: BTreeMap::from([(
                    "fr".to_string(),
                    Localized {
                        subject: Some("Export {{ job }} prêt".into()),
                        text: Some("Téléchargez {{ job }}".into()),
                        html: Some("<b>{{ job }}</b>".into()),
                    },
                )]),
                locale: None,
            },
        )]))
    }

    fn parse(body: Value) -> Result<Notification, FieldError> {
        let request: NotificationRequest = serde_json::from_value(body).unwrap();
        request
            .parse("acme", &routes(), &templates(), OffsetDateTime::now_utc())
            .map(|(notification, _)| notification)
    }

    fn field_of(body: Value) -> String {
        parse(body).unwrap_err().field
    }

    /// An email on the default route (which allows no sender of its own) with `field` set.
    fn email_with(field: &str, value: Value) -> Value {
        let mut body = json!({"channel":"email","to":"a@b.io","subject":"s","text":"t"});
        body[field] = value;
        body
    }

    /// The same on route `mail`, which allows two senders and keeps no tags.
    fn mail_with(field: &str, value: Value) -> Value {
        let mut body = email_with(field, value);
        body["route"] = json!("mail");
        body
    }

    #[test]
    fn each_large_field_has_a_limit_of_its_own() {
        let long = |bytes: usize| json!("x".repeat(bytes));
        assert_eq!(field_of(email_with("text", long(200 * 1024 + 1))), "text");
        assert_eq!(field_of(email_with("html", long(200 * 1024 + 1))), "html");
        assert!(parse(email_with("html", long(200 * 1024))).is_ok());
        let hook = |payload: Value| json!({"channel": "webhook", "to": "https://hooks.example.com/x", "payload": payload});
        assert_eq!(field_of(hook(json!({"blob": long(200 * 1024)}))), "payload");
        assert!(parse(hook(json!({"blob": long(1024)}))).is_ok());
        let templated = |job: Value| {
            json!({"channel": "email", "to": "a@b.io", "template": "export-ready",
                   "data": {"job": job}})
        };
        assert_eq!(field_of(templated(long(64 * 1024))), "data");
        assert!(parse(templated(json!("42"))).is_ok());
    }

    #[test]
    fn an_email_carries_its_own_sender_copies_tags_and_headers() {
        let mut body = mail_with("from", json!("\"Acme Billing\" <Billing@ACME.example>"));
        body["reply_to"] = json!("help@acme.example");
        body["cc"] = json!(["grace@example.com"]);
        body["bcc"] = json!(["audit@acme.example"]);
        body["headers"] = json!({"List-Unsubscribe": "<mailto:u@acme.example>"});
        let n = parse(body).unwrap();
        let email = &n.content.email;
        assert_eq!(
            email.from.as_deref(),
            Some("Acme Billing <Billing@ACME.example>")
        );
        assert_eq!(email.reply_to.as_deref(), Some("help@acme.example"));
        assert_eq!((email.cc.len(), email.bcc.len()), (1, 1));
        assert_eq!(email.headers["List-Unsubscribe"], "<mailto:u@acme.example>");

        let news = parse(mail_with("from", json!("digest@news.acme.example"))).unwrap();
        assert_eq!(
            news.content.email.from.as_deref(),
            Some("digest@news.acme.example")
        );
        let tagged = parse(email_with("tags", json!({"kind": "invoice"}))).unwrap();
        assert_eq!(tagged.content.email.tags["kind"], "invoice");
    }

    #[test]
    fn attachments_are_kept_by_their_digest_and_refused_where_they_cannot_go() {
        let attachment =
            json!([{"filename": "a.txt", "content_type": "text/plain", "content": "aGk="}]);
        let request: NotificationRequest =
            serde_json::from_value(email_with("attachments", attachment.clone())).unwrap();
        let (n, files) = request
            .parse("acme", &routes(), &templates(), OffsetDateTime::now_utc())
            .unwrap();
        let kept = &n.content.email.attachments;
        assert_eq!((kept.len(), kept[0].size), (1, 2));
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].bytes.as_slice(), &files[0].sha256),
            (&b"hi"[..], &kept[0].sha256)
        );

        let mut forged = email_with("attachments", attachment.clone());
        forged["text"] = json!(format!("{PLACEHOLDER_OPEN}{}:mime}}}}", kept[0].sha256));
        let refused = parse(forged).unwrap_err();
        assert_eq!(refused.field, "text");
        assert!(
            refused.message.contains("herald writes it"),
            "{}",
            refused.message
        );

        let refused = parse(mail_with("attachments", attachment.clone())).unwrap_err();
        assert_eq!(refused.field, "attachments");
        assert!(
            refused.message.contains("cannot take attachments"),
            "{}",
            refused.message
        );
        let sms = json!({"channel":"sms","to":"+15555550100","text":"t","attachments": attachment});
        let refused = parse(sms).unwrap_err();
        assert_eq!(refused.field, "attachments");
        assert!(
            refused.message.contains("not used on the sms channel"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn a_valid_email_is_queued_on_the_default_route() {
        let n = parse(json!({"channel":"email","to":"ada@example.com","subject":"Hi","text":"x"}))
            .unwrap();
        assert_eq!((n.state, n.route.as_str()), (State::Queued, "sandbox"));
        assert_eq!(n.delivery, Delivery::AtMostOnce);
        assert_eq!(n.next_attempt_at, Some(n.created_at));
    }

    #[test]
    fn delivery_defaults_to_the_routes_policy() {
        let n =
            parse(json!({"channel":"email","to":"a@b.io","route":"mail","subject":"s","text":"t"}))
                .unwrap();
        assert_eq!(n.delivery, Delivery::AtLeastOnce);
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases = [
            (json!({"channel":"fax","to":"x"}), "channel"),
            (
                json!({"channel":"email","to":"nope","subject":"s","text":"t"}),
                "to",
            ),
            (json!({"channel":"sms","to":"555","text":"t"}), "to"),
            (
                json!({"channel":"webhook","to":"ftp://x.io","payload":{}}),
                "to",
            ),
            (
                json!({"channel":"email","to":"a@b.io","subject":"a\r\nBcc: e@x.io","text":"t"}),
                "subject",
            ),
            (
                json!({"channel":"email","to":"a@b.io","text":"t"}),
                "subject",
            ),
            (
                json!({"channel":"email","to":"a@b.io","subject":"s"}),
                "text",
            ),
            (
                json!({"channel":"sms","to":"+14155550100","text":"t","route":"mail"}),
                "route",
            ),
            (
                json!({"channel":"sms","to":"+14155550100","text":"t","route":"nope"}),
                "route",
            ),
            (
                json!({"channel":"sms","to":"+14155550100","text":"t","delivery":"twice"}),
                "delivery",
            ),
            (
                json!({"channel":"webhook","to":"https://h.io/x","payload":[1]}),
                "payload",
            ),
            (
                json!({"channel":"sms","to":"+14155550100","text":"t","metadata":{"k":1}}),
                "metadata.k",
            ),
            (
                json!({"channel":"email","to":"a@b.io","template":"nope"}),
                "template",
            ),
            (
                json!({"channel":"email","to":"a@b.io","template":"export-ready","data":{}}),
                "data",
            ),
            (
                json!({"channel":"email","to":"a@b.io","template":"export-ready","text":"t"}),
                "text",
            ),
            (
                json!({"channel":"sms","to":"+14155550100","text":"t","cc":["a@b.io"]}),
                "cc",
            ),
            (email_with("from", json!("billing@acme.example")), "from"),
            (mail_with("from", json!("ceo@acme.example")), "from"),
            (
                mail_with("from", json!("Eve <eve@news.acme.example.evil.io>")),
                "from",
            ),
            (
                mail_with("from", json!("Acme, Inc. <billing@acme.example>")),
                "from",
            ),
            (email_with("reply_to", json!("not an address")), "reply_to"),
            (email_with("cc", json!(["a@b.io", "nope"])), "cc[1]"),
            (email_with("bcc", json!(vec!["x@b.io"; 50])), "bcc"),
            (mail_with("tags", json!({"kind": "invoice"})), "tags"),
            (email_with("tags", json!({"kind": "in voice"})), "tags.kind"),
            (
                email_with("tags", json!({"herald_id": "x"})),
                "tags.herald_id",
            ),
            (
                email_with("headers", json!({"Bcc": "eve@x.io"})),
                "headers.Bcc",
            ),
            (
                email_with("headers", json!({"content-type": "text/x"})),
                "headers.content-type",
            ),
            (
                email_with("headers", json!({"X-A": "1\r\nBcc: eve@x.io"})),
                "headers.X-A",
            ),
            (email_with("headers", json!({"X A": "1"})), "headers.X A"),
            (
                email_with("headers", json!({"X-A": "1", "x-a": "2"})),
                "headers.x-a",
            ),
            (email_with("headers", json!({"X-A": 1})), "headers.X-A"),
        ];
        for (body, field) in cases {
            assert_eq!(field_of(body.clone()), field, "{body}");
        }
    }

    #[test]
    fn a_template_is_rendered_with_its_data_and_html_is_escaped() {
        let n = parse(
            json!({"channel":"email","to":"a@b.io","template":"export-ready",
                             "data":{"job":"<42>"}}),
        )
        .unwrap();
        assert_eq!(n.content.subject.as_deref(), Some("Export <42> ready"));
        assert_eq!(n.content.html.as_deref(), Some("<b>&lt;42&gt;</b>"));
        assert_eq!(n.content.template.as_deref(), Some("export-ready"));
    }

    #[test]
    fn a_send_at_that_is_not_rfc_3339_says_which_form_to_use() {
        let err = serde_json::from_value::<NotificationRequest>(json!({
            "channel": "email", "to": "a@example.com", "text": "hi",
            "send_at": "2026-12-01 09:30"
        }))
        .unwrap_err();
        assert!(
            err.to_string().contains(
                "`2026-12-01 09:30` is not an RFC 3339 date-time: use e.g. 2026-12-01T09:30:00Z"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_send_at_whose_offset_leaves_the_range_in_utc_is_refused() {
        for poison in [
            "0000-01-01T00:00:00+23:59",
            "9999-12-31T23:59:59-23:59",
            "1969-12-31T23:59:59Z",
        ] {
            let err = serde_json::from_value::<NotificationRequest>(json!({
                "channel": "email", "to": "a@example.com", "text": "hi", "send_at": poison
            }))
            .unwrap_err();
            assert!(
                err.to_string()
                    .contains("must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"),
                "{poison}: {err}"
            );
        }
    }

    #[test]
    fn send_at_in_the_future_sets_the_first_due_time() {
        let n = parse(json!({"channel":"sms","to":"+14155550100","text":"t",
                             "send_at":"2999-01-01T00:00:00Z"}))
        .unwrap();
        assert_eq!(n.next_attempt_at, n.send_at);
    }

    #[test]
    fn a_locale_falls_back_to_its_language_then_to_the_default_and_is_recorded() {
        let export = |locale: &str| {
            parse(
                json!({"channel":"email","to":"a@b.io","template":"export-ready",
                         "data":{"job":"j-7"},"locale":locale}),
            )
        };
        for (asked, subject, recorded) in [
            ("fr", "Export j-7 prêt", Some("fr")),
            ("fr-CA", "Export j-7 prêt", Some("fr")),
            ("FR-ca", "Export j-7 prêt", Some("fr")),
            ("de-AT", "Export j-7 ready", None),
            ("frx", "Export j-7 ready", None),
        ] {
            let n = export(asked).unwrap();
            assert_eq!(n.content.subject.as_deref(), Some(subject), "{asked}");
            assert_eq!(n.content.locale.as_deref(), recorded, "{asked}");
        }
        for (locale, message) in [
            ("fr_CA", "must be a language tag such as fr or fr-CA"),
            ("", "must be a language tag such as fr or fr-CA"),
            ("fr--CA", "must be a language tag such as fr or fr-CA"),
            ("1fr", "must be a language tag such as fr or fr-CA"),
        ] {
            let err = export(locale).unwrap_err();
            assert_eq!(
                (err.field.as_str(), err.message.as_str()),
                ("locale", message)
            );
        }
        let literal = parse(json!({"channel":"sms","to":"+14155550100","text":"t","locale":"fr"}));
        assert_eq!(literal.unwrap_err().message, "is only used with a template");
    }

    #[test]
    fn an_expiry_is_later_than_now_and_than_send_at_and_given_one_way() {
        let sms = |extra: Value| {
            let mut body = json!({"channel":"sms","to":"+14155550100","text":"t"});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let now = OffsetDateTime::now_utc();
        let n = parse(sms(json!({"ttl_seconds": 60}))).unwrap();
        let ttl = n.expires_at.unwrap() - n.created_at;
        assert_eq!(ttl, time::Duration::seconds(60));
        assert!(n.created_at >= now - time::Duration::seconds(5));
        let n = parse(sms(json!({"expires_at": "2999-01-01T01:00:00+01:00"}))).unwrap();
        assert_eq!(
            n.expires_at,
            Some(time::macros::datetime!(2999-01-01 00:00 UTC))
        );
        for (extra, field, message) in [
            (
                json!({"expires_at": "2999-01-01T00:00:00Z", "ttl_seconds": 60}),
                "ttl_seconds",
                "give expires_at or ttl_seconds, not both",
            ),
            (
                json!({"ttl_seconds": 0}),
                "ttl_seconds",
                "must be 1 to 31536000",
            ),
            (
                json!({"ttl_seconds": 31_536_001}),
                "ttl_seconds",
                "must be 1 to 31536000",
            ),
            (
                json!({"expires_at": "2001-01-01T00:00:00Z"}),
                "expires_at",
                "must be later than now",
            ),
            (
                json!({"send_at": "2999-01-01T00:00:00Z", "expires_at": "2999-01-01T00:00:00Z"}),
                "expires_at",
                "must be later than send_at",
            ),
            (
                json!({"send_at": "2999-01-01T00:00:00Z", "ttl_seconds": 60}),
                "ttl_seconds",
                "must be later than send_at",
            ),
        ] {
            let err = parse(sms(extra.clone())).unwrap_err();
            assert_eq!(
                (err.field.as_str(), err.message.as_str()),
                (field, message),
                "{extra}"
            );
        }
    }
}
