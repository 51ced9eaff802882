//! The fake's two routes — `POST /v3.1/send` and `GET /v3/REST/message` — and what they
//! remember.
//!
//! A request is recorded, then authenticated, then takes the next pending fault for its kind,
//! then is processed; all under one lock, never held across an `.await`. A fault "before
//! processing" answers instead of processing; one "after processing" changes only what goes on
//! the wire, so a send it spoils is still a delivery in the ledger and in `/message`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use herald_provider::Attachment;
use herald_provider::fake::Kill;
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Delivery, FakeConfig, Fault, Received, State};

/// Mailjet's answer to wrong credentials (`mj-0015`).
const UNAUTHORIZED_BODY: &str = include_str!("../../../../fixtures/mailjet/error_401.json");
/// Mailjet's answer to a body that is not JSON (`mj-0002`), as documented.
const MALFORMED_BODY: &str = include_str!("../../../../fixtures/mailjet/error_global_400.json");

/// Where the first `MessageID` starts: the size of the IDs in Mailjet's examples, so that a
/// client reading them as 32-bit (or as floats) would show it.
const FIRST_MESSAGE_ID: u64 = 70_650_219_165_027_410;

/// The fake vendor: its settings and its state, which its routes share.
pub struct Vendor {
    config: FakeConfig,
    state: Mutex<State>,
}

impl Vendor {
    pub(super) fn new(config: FakeConfig) -> Self {
        Vendor {
            config,
            state: Mutex::new(State::default()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A delivered message as `/message` lists it.
struct Stored {
    delivery: Delivery,
    arrived: OffsetDateTime,
    /// Monotonic twin of `arrived`, for the visibility lag.
    at: Instant,
}

/// `/message`'s records, beside the ledger (which holds only what tests compare).
#[derive(Default)]
pub(super) struct Records(Vec<Stored>);

pub(super) fn router(shared: Arc<Vendor>) -> Router {
    Router::new()
        .route("/v3.1/send", post(send))
        .route("/v3/REST/message", get(list))
        .with_state(shared)
}

async fn send(
    AxumState(shared): AxumState<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (fault, answer) = {
        let mut state = shared.lock();
        record(&mut state, "POST", &uri, &headers, &body);
        if !authorized(&shared.config, &headers) {
            return raw_json(StatusCode::UNAUTHORIZED, UNAUTHORIZED_BODY);
        }
        let fault = state.send_faults.pop_front();
        let answer = match fault {
            Some(fault) if fault.is_before_processing() => None,
            _ => Some(process_send(&shared.config, &mut state, &body)),
        };
        (fault, answer)
    };
    finish(&shared, kill, fault, answer).await
}

async fn list(
    AxumState(shared): AxumState<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let (fault, answer) = {
        let mut state = shared.lock();
        record(&mut state, "GET", &uri, &headers, &[]);
        if !authorized(&shared.config, &headers) {
            return raw_json(StatusCode::UNAUTHORIZED, UNAUTHORIZED_BODY);
        }
        let fault = state.lookup_faults.pop_front();
        let answer = match fault {
            Some(fault) if fault.is_before_processing() => None,
            _ => Some(process_list(&shared.config, &state, &uri)),
        };
        (fault, answer)
    };
    finish(&shared, kill, fault, answer).await
}

/// Puts the fault (if any) between the processed answer and the wire.
async fn finish(
    shared: &Vendor,
    kill: Kill,
    fault: Option<Fault>,
    answer: Option<Response>,
) -> Response {
    let Some(answer) = answer else {
        return match fault {
            Some(Fault::RateLimited) => {
                let mut response = global_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    None,
                    "Oops! You have reached the maximum number of calls allowed per minute by \
                     our API.",
                );
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            _ => global_error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                "Service temporarily unavailable",
            ),
        };
    };
    match fault {
        Some(Fault::AcceptThenDrop) => kill.kill().await,
        Some(Fault::Delay) => {
            tokio::time::sleep(shared.config.delay).await;
            answer
        }
        Some(Fault::ErrorAfterProcessing) => global_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "Ouch! Something went wrong on our side and we apologize!",
        ),
        _ => answer,
    }
}

fn record(state: &mut State, method: &str, uri: &Uri, headers: &HeaderMap, body: &[u8]) {
    state.received.push(Received {
        method: method.to_owned(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        basic_user: basic_credentials(headers).map(|(user, _)| user),
        content_type: headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: String::from_utf8_lossy(body).into_owned(),
    });
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = STANDARD.decode(encoded.trim()).ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn authorized(config: &FakeConfig, headers: &HeaderMap) -> bool {
    basic_credentials(headers).is_some_and(|(user, password)| {
        user == config.api_key && password == config.api_secret.expose_secret()
    })
}

fn raw_json(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Mailjet's global error: `{"ErrorIdentifier", "ErrorCode", "ErrorMessage", "StatusCode"}`.
fn global_error(status: StatusCode, code: Option<&str>, message: &str) -> Response {
    let mut body = json!({
        "ErrorIdentifier": uuid::Uuid::new_v4().to_string(),
        "ErrorMessage": message,
        "StatusCode": status.as_u16(),
    });
    if let Some(code) = code {
        body["ErrorCode"] = Value::from(code);
    }
    (status, axum::Json(body)).into_response()
}

/// One entry of a message's `Errors`.
struct MessageError {
    status: StatusCode,
    code: &'static str,
    message: String,
    related: &'static [&'static str],
}

impl MessageError {
    fn new(
        status: StatusCode,
        code: &'static str,
        message: impl Into<String>,
        related: &'static [&'static str],
    ) -> Self {
        MessageError {
            status,
            code,
            message: message.into(),
            related,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "ErrorIdentifier": uuid::Uuid::new_v4().to_string(),
            "ErrorCode": self.code,
            "StatusCode": self.status.as_u16(),
            "ErrorMessage": self.message,
            "ErrorRelatedTo": self.related,
        })
    }
}

/// Good enough for a fake: one `@`, something before it, a dotted domain after it.
fn is_email(address: &str) -> bool {
    address.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && !domain.contains('@') && domain.contains('.')
    })
}

fn text_of<'a>(message: &'a Value, name: &str) -> Option<&'a str> {
    message
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn validate(config: &FakeConfig, message: &Value) -> Vec<MessageError> {
    use StatusCode as S;
    let mut errors = Vec::new();
    match message
        .get("From")
        .and_then(|f| f.get("Email"))
        .and_then(Value::as_str)
    {
        None => errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0003",
            "Missing mandatory property.",
            &["From"],
        )),
        Some(from) if !is_email(from) => errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0013",
            format!("\"{from}\" is an invalid email address."),
            &["From.Email"],
        )),
        Some(from)
            if !config.allowed_senders.is_empty()
                && !config.allowed_senders.iter().any(|s| s == from) =>
        {
            errors.push(MessageError::new(
                S::FORBIDDEN,
                "send-0008",
                format!("\"{from}\" is not an authorized sender email address for your account."),
                &["From"],
            ))
        }
        Some(_) => {}
    }
    match message.get("To").and_then(Value::as_array) {
        None => errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0003",
            "Missing mandatory property.",
            &["To"],
        )),
        Some(to) if to.is_empty() => errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0007",
            "Array must not be empty.",
            &["To"],
        )),
        Some(to) => {
            for recipient in to {
                let email = recipient.get("Email").and_then(Value::as_str).unwrap_or("");
                if !is_email(email) {
                    errors.push(MessageError::new(
                        S::BAD_REQUEST,
                        "mj-0013",
                        format!("\"{email}\" is an invalid email address."),
                        &["To[].Email"],
                    ));
                }
            }
        }
    }
    let copies = [("Cc", &["Cc[].Email"]), ("Bcc", &["Bcc[].Email"])];
    for (field, related) in copies {
        let Some(list) = message.get(field) else {
            continue;
        };
        let emails = list.as_array().map(|list| {
            list.iter()
                .map(|r| r.get("Email").and_then(Value::as_str).unwrap_or(""))
                .collect::<Vec<_>>()
        });
        match emails {
            Some(emails) => {
                for email in emails.into_iter().filter(|e| !is_email(e)) {
                    errors.push(MessageError::new(
                        S::BAD_REQUEST,
                        "mj-0013",
                        format!("\"{email}\" is an invalid email address."),
                        related,
                    ));
                }
            }
            None => errors.push(MessageError::new(
                S::BAD_REQUEST,
                "mj-0004",
                "Type mismatch. Expected type \"array of emails\".",
                related,
            )),
        }
    }
    if let Some(reply_to) = message.get("ReplyTo") {
        let email = reply_to.get("Email").and_then(Value::as_str).unwrap_or("");
        // Mailjet refuses a null name rather than ignoring it.
        let null_name = reply_to.get("Name").is_some_and(Value::is_null);
        if !is_email(email) || null_name {
            errors.push(MessageError::new(
                S::BAD_REQUEST,
                "send-0018",
                "Property value cannot be null.",
                &["ReplyTo"],
            ));
        }
    }
    if let Some(headers) = message.get("Headers")
        && !headers
            .as_object()
            .is_some_and(|h| h.values().all(Value::is_string))
    {
        errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0004",
            "Type mismatch. Expected type \"object of strings\".",
            &["Headers"],
        ));
    }
    if ["TextPart", "HTMLPart", "TemplateID"]
        .iter()
        .all(|part| message.get(*part).is_none_or(|v| v.is_null() || v == ""))
    {
        errors.push(MessageError::new(
            S::BAD_REQUEST,
            "send-0003",
            "At least \"HTMLPart\", \"TextPart\" or \"TemplateID\" must be provided.",
            &["HTMLPart", "TextPart"],
        ));
    }
    if text_of(message, "Subject").is_some_and(|s| s.chars().count() > 255) {
        errors.push(MessageError::new(
            S::BAD_REQUEST,
            "mj-0006",
            "Characters limit exceeded for the property. Max allowed - 255.",
            &["Subject"],
        ));
    }
    errors
}

/// A message's `Attachments` as the ledger records them, or what Mailjet answers for them: a
/// missing property is `mj-0003` and an empty one `mj-0012`, as documented; `Base64Content`
/// that is not base64 has no documented code, and gets the type mismatch `mj-0004`.
fn attachments(message: &Value) -> Result<Vec<Attachment>, Vec<MessageError>> {
    use StatusCode as S;
    let Some(list) = message.get("Attachments") else {
        return Ok(Vec::new());
    };
    let Some(list) = list.as_array() else {
        return Err(vec![MessageError::new(
            S::BAD_REQUEST,
            "mj-0004",
            "Type mismatch. Expected type \"array of attachments\".",
            &["Attachments"],
        )]);
    };
    let mut errors = Vec::new();
    let mut attachments = Vec::new();
    for attachment in list {
        let property = |name, related| match attachment.get(name).and_then(Value::as_str) {
            None => Err(MessageError::new(
                S::BAD_REQUEST,
                "mj-0003",
                "Missing mandatory property.",
                related,
            )),
            Some("") => Err(MessageError::new(
                S::BAD_REQUEST,
                "mj-0012",
                "Property value cannot be empty.",
                related,
            )),
            Some(value) => Ok(value),
        };
        let properties = (
            property("ContentType", &["Attachments[].ContentType"]),
            property("Filename", &["Attachments[].Filename"]),
            property("Base64Content", &["Attachments[].Base64Content"]),
        );
        let (Ok(content_type), Ok(filename), Ok(content)) = properties else {
            let (a, b, c) = properties;
            errors.extend([a.err(), b.err(), c.err()].into_iter().flatten());
            continue;
        };
        let Some(attachment) = Attachment::received(filename, content_type, content) else {
            errors.push(MessageError::new(
                S::BAD_REQUEST,
                "mj-0004",
                "Type mismatch. Expected type \"base64\".",
                &["Attachments[].Base64Content"],
            ));
            continue;
        };
        attachments.push(attachment);
    }
    if errors.is_empty() {
        Ok(attachments)
    } else {
        Err(errors)
    }
}

fn process_send(config: &FakeConfig, state: &mut State, body: &[u8]) -> Response {
    let Ok(payload) = serde_json::from_slice::<Value>(body) else {
        return raw_json(StatusCode::BAD_REQUEST, MALFORMED_BODY);
    };
    let Some(messages) = payload.get("Messages").and_then(Value::as_array) else {
        return global_error(
            StatusCode::BAD_REQUEST,
            Some("mj-0003"),
            "Missing mandatory property.",
        );
    };
    if messages.is_empty() {
        return global_error(
            StatusCode::BAD_REQUEST,
            Some("mj-0007"),
            "Array must not be empty.",
        );
    }
    // Each message is processed on its own, as Mailjet does in bulk.
    let mut results = Vec::new();
    let mut delivered_any = false;
    let mut worst = StatusCode::OK;
    for message in messages {
        let mut errors = validate(config, message);
        let attachments = attachments(message).unwrap_or_else(|mut found| {
            errors.append(&mut found);
            Vec::new()
        });
        if let Some(status) = errors.iter().map(|e| e.status).max_by_key(|s| s.as_u16()) {
            worst = worst.max(status);
            results.push(json!({
                "Errors": errors.iter().map(MessageError::to_json).collect::<Vec<_>>(),
                "Status": "error",
            }));
            continue;
        }
        delivered_any = true;
        let custom_id = text_of(message, "CustomID").unwrap_or("").to_owned();
        let from = text_of(&message["From"], "Email").unwrap_or("").to_owned();
        let subject = text_of(message, "Subject").map(str::to_owned);
        let mut to = Vec::new();
        for recipient in message["To"].as_array().into_iter().flatten() {
            let email = text_of(recipient, "Email").unwrap_or("").to_owned();
            let message_id = FIRST_MESSAGE_ID + state.records.0.len() as u64;
            let message_uuid = uuid::Uuid::new_v4().to_string();
            let delivery = Delivery {
                message_id,
                message_uuid: message_uuid.clone(),
                custom_id: custom_id.clone(),
                from: from.clone(),
                to: email.clone(),
                subject: subject.clone(),
                attachments: attachments.clone(),
            };
            state.ledger.deliveries.push(delivery.clone());
            state.records.0.push(Stored {
                delivery,
                arrived: OffsetDateTime::now_utc(),
                at: Instant::now(),
            });
            to.push(json!({
                "Email": email,
                "MessageUUID": message_uuid,
                "MessageID": message_id,
                "MessageHref": format!("https://api.mailjet.com/v3/REST/message/{message_id}"),
            }));
        }
        results.push(json!({
            "Status": "success",
            "CustomID": custom_id,
            "To": to,
            "Cc": [],
            "Bcc": [],
        }));
    }
    // The docs show per-message results but not the HTTP status of a request whose every
    // message failed; the fake answers the worst of the messages' own status codes then.
    let status = if delivered_any { StatusCode::OK } else { worst };
    (status, axum::Json(json!({ "Messages": results }))).into_response()
}

/// `FromTS`: a Unix timestamp or an RFC 3339 date-time, as the reference accepts.
fn parse_timestamp(value: &str) -> Option<OffsetDateTime> {
    match value.parse::<i64>() {
        Ok(secs) => OffsetDateTime::from_unix_timestamp(secs).ok(),
        Err(_) => OffsetDateTime::parse(value, &Rfc3339).ok(),
    }
}

/// The REST API's (v3) error shape: `{"ErrorInfo", "ErrorMessage", "StatusCode"}`.
fn rest_error(message: String) -> Response {
    let body = json!({ "ErrorInfo": "", "ErrorMessage": message, "StatusCode": 400 });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

fn process_list(config: &FakeConfig, state: &State, uri: &Uri) -> Response {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let value = |name: &str| {
        query
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    let from = match value("FromTS") {
        None => None,
        Some(raw) => match parse_timestamp(raw) {
            Some(at) => Some(at),
            None => return rest_error(format!("Invalid FromTS: \"{raw}\"")),
        },
    };
    let show_custom_id = value("ShowCustomID").is_some_and(|v| v == "true" || v == "1");
    let limit = value("Limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(10)
        .clamp(1, 1000);
    let offset = value("Offset")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);

    let now = Instant::now();
    let matching: Vec<&Stored> = state
        .records
        .0
        .iter()
        .filter(|s| now.duration_since(s.at) >= config.visibility_lag)
        .filter(|s| value("CustomID").is_none_or(|id| s.delivery.custom_id == id))
        .filter(|s| from.is_none_or(|from| s.arrived >= from))
        .collect();
    let data: Vec<Value> = matching
        .iter()
        .skip(offset)
        .take(limit)
        .map(|s| {
            let d = &s.delivery;
            let mut entry = json!({
                "ArrivedAt": s.arrived.format(&Rfc3339).unwrap_or_default(),
                "AttachmentCount": d.attachments.len(),
                "AttemptCount": 0,
                "CampaignID": 0,
                "ContactAlt": "",
                "ContactID": 0,
                "Delay": 0,
                "DestinationID": 0,
                "FilterTime": 0,
                "ID": d.message_id,
                "IsClickTracked": false,
                "IsHTMLPartIncluded": false,
                "IsOpenTracked": false,
                "IsTextPartIncluded": true,
                "IsUnsubTracked": false,
                "MessageSize": 0,
                "SenderID": 0,
                "SpamassassinScore": 0,
                "SpamassRules": "",
                "StateID": 0,
                "StatePermanent": false,
                "Status": "sent",
                "Subject": "",
                "UUID": d.message_uuid,
            });
            if show_custom_id {
                entry["CustomID"] = Value::from(d.custom_id.as_str());
            }
            entry
        })
        .collect();
    let body = json!({ "Count": data.len(), "Data": data, "Total": matching.len() });
    (StatusCode::OK, axum::Json(body)).into_response()
}
