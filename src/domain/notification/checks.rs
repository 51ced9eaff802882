//! A request checked and parsed: every field's limit (a vendor's where it has one), the content
//! each channel needs, recipients, metadata, and the headers a category's unsubscribe adds.

use std::time::Duration;

use herald_provider::{Attachment, EmailOptions, PLACEHOLDER_OPEN};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::{Content, Notification, NotificationRequest};
use crate::domain::attachment::File;
use crate::domain::email::EmailFields;
use crate::domain::routing::{RouteInfo, Routing, Templates, locale_tag};
use crate::domain::values::header_safe;
use crate::domain::{
    Categories, Channel, ChatTarget, Delivery, EmailAddress, FieldError, IdempotencyKey,
    NotificationId, PhoneNumber, PushTarget, State, WebhookUrl,
};

pub(super) const MAX_SUBJECT_BYTES: usize = 998;

/// An email's `text` or `html`, as written or rendered: far more than a person reads (Gmail
/// clips an HTML part past 102 KB), and within every vendor's message limit with room for
/// attachments.
pub(super) const MAX_EMAIL_PART_BYTES: usize = 200 * 1024;

/// A webhook's `payload`, as JSON.
pub(super) const MAX_PAYLOAD_BYTES: usize = 200 * 1024;

/// A template's `data`, as JSON: values for placeholders, not documents.
pub(super) const MAX_TEMPLATE_DATA_BYTES: usize = 64 * 1024;

pub(super) const MAX_SMS_CHARS: usize = 1600;

pub(super) const MAX_PUSH_TEXT_BYTES: usize = 4096;

/// Slack's limit for a message's text, in UTF-16 units; longer text it truncates.
pub(super) const MAX_CHAT_TEXT_CHARS: usize = 40_000;

/// Slack's limit of blocks in one message.
pub(super) const MAX_CHAT_BLOCKS: usize = 50;

pub(super) const MAX_ROUTE_BYTES: usize = 64;

pub(super) const MAX_METADATA_KEYS: usize = 50;

/// A year: an expiry further out is no expiry a sender means.
pub(super) const MAX_TTL_SECONDS: u64 = 31_536_000;

pub(super) const MAX_METADATA_KEY_CHARS: usize = 40;

pub(super) const MAX_METADATA_VALUE_CHARS: usize = 500;

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
        let (email, files) = self.email(channel, route, route_info, routing)?;
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

    /// An email's options as kept and its attachments' contents; other channels refuse them.
    fn email(
        &self,
        channel: Channel,
        route: &str,
        route_info: &RouteInfo,
        routing: &Routing,
    ) -> Result<(EmailOptions, Vec<File>), FieldError> {
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
        Ok((
            EmailOptions {
                attachments,
                ..email
            },
            files,
        ))
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
pub(super) fn json_bytes(value: &impl serde::Serialize) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// An email's headers with the one-click unsubscribe of `category` added, where recipients may
/// leave it; a request that writes those headers itself is refused, as herald writes them.
pub(super) fn unsubscribe_headers(
    mut email: EmailOptions,
    categories: &Categories,
    tenant: &str,
    to: &str,
    category: &str,
) -> Result<EmailOptions, FieldError> {
    let recipient = crate::domain::suppression_recipient(Channel::Email, to);
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
pub(super) fn names_a_placeholder(content: &Content) -> Option<String> {
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
pub(super) fn micros(t: OffsetDateTime) -> OffsetDateTime {
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
pub(super) fn check_content(channel: Channel, content: &Content) -> Result<(), FieldError> {
    if let Some(subject) = &content.subject {
        header_safe("subject", subject, MAX_SUBJECT_BYTES)?;
    }
    let rules = ContentRules { channel, content };
    if channel != Channel::Chat {
        rules.forbid("blocks", content.blocks.is_some())?;
    }
    match channel {
        Channel::Email => rules.email(),
        Channel::Sms => rules.sms(),
        Channel::Push => rules.push(),
        Channel::Webhook => rules.webhook(),
        Channel::Chat => rules.chat(),
    }
}

/// One channel's rules over a notification's content.
struct ContentRules<'a> {
    channel: Channel,
    content: &'a Content,
}

impl ContentRules<'_> {
    fn forbid(&self, field: &str, set: bool) -> Result<(), FieldError> {
        if set {
            Err(FieldError::new(
                field,
                format!("is not used on the {} channel", self.channel),
            ))
        } else {
            Ok(())
        }
    }

    fn require(&self, field: &str, set: bool) -> Result<(), FieldError> {
        if set {
            Ok(())
        } else {
            Err(FieldError::new(
                field,
                format!("is required on the {} channel", self.channel),
            ))
        }
    }

    fn email(&self) -> Result<(), FieldError> {
        self.require("subject", self.content.subject.is_some())?;
        self.require(
            "text",
            self.content.text.is_some() || self.content.html.is_some(),
        )?;
        for (field, part) in [("text", &self.content.text), ("html", &self.content.html)] {
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
        self.forbid("payload", self.content.payload.is_some())
    }

    fn sms(&self) -> Result<(), FieldError> {
        self.forbid("subject", self.content.subject.is_some())?;
        self.forbid("html", self.content.html.is_some())?;
        self.forbid("payload", self.content.payload.is_some())?;
        let text = self.content.text.as_deref().unwrap_or_default();
        self.require("text", !text.is_empty())?;
        if text.chars().count() > MAX_SMS_CHARS {
            return Err(FieldError::new(
                "text",
                format!("must be at most {MAX_SMS_CHARS} characters"),
            ));
        }
        Ok(())
    }

    fn push(&self) -> Result<(), FieldError> {
        self.forbid("html", self.content.html.is_some())?;
        self.forbid("payload", self.content.payload.is_some())?;
        let text = self.content.text.as_deref().unwrap_or_default();
        self.require("text", !text.is_empty())?;
        if text.len() > MAX_PUSH_TEXT_BYTES {
            return Err(FieldError::new(
                "text",
                format!("must be at most {MAX_PUSH_TEXT_BYTES} bytes"),
            ));
        }
        Ok(())
    }

    fn webhook(&self) -> Result<(), FieldError> {
        self.forbid("subject", self.content.subject.is_some())?;
        self.forbid("text", self.content.text.is_some())?;
        self.forbid("html", self.content.html.is_some())?;
        match &self.content.payload {
            Some(payload @ Value::Object(_)) if json_bytes(payload) > MAX_PAYLOAD_BYTES => {
                Err(FieldError::new(
                    "payload",
                    format!("must be at most {MAX_PAYLOAD_BYTES} bytes as JSON"),
                ))
            }
            Some(Value::Object(_)) => Ok(()),
            Some(_) => Err(FieldError::new("payload", "must be a JSON object")),
            None => self.require("payload", false),
        }
    }

    fn chat(&self) -> Result<(), FieldError> {
        self.forbid("subject", self.content.subject.is_some())?;
        self.forbid("html", self.content.html.is_some())?;
        self.forbid("payload", self.content.payload.is_some())?;
        // A phone shows the text, also beside blocks: blank shows nothing.
        let text = self.content.text.as_deref().unwrap_or_default();
        self.require("text", !text.trim().is_empty())?;
        // Counted in UTF-16 units, the larger count of "characters" (an emoji is two).
        if text.encode_utf16().count() > MAX_CHAT_TEXT_CHARS {
            return Err(FieldError::new(
                "text",
                format!("must be at most {MAX_CHAT_TEXT_CHARS} characters"),
            ));
        }
        match &self.content.blocks {
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

pub(super) fn parse_metadata(
    metadata: Map<String, Value>,
) -> Result<Map<String, Value>, FieldError> {
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
