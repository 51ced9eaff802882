//! The fake's two routes — create and list on `…/Messages.json` — and what they remember.
//!
//! A request is recorded, then authenticated, then takes the next pending fault for its kind,
//! then is processed; all under one lock, never held across an `.await`. A fault "before
//! processing" answers instead of processing; one "after processing" changes only what goes on
//! the wire, so a create it spoils is still a delivery in the ledger and in the list.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use base64::Engine;
use herald_provider::fake::Kill;
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc2822;

use super::{Delivery, FakeConfig, Fault, Received, State};
use std::sync::Arc;

/// Twilio's answer to wrong credentials, as documented.
const UNAUTHORIZED_BODY: &str = include_str!("../../../../fixtures/twilio/error_20003.json");
/// Twilio's answer to too many concurrent requests, as documented.
const RATE_LIMITED_BODY: &str = include_str!("../../../../fixtures/twilio/error_20429.json");

/// Twilio's test numbers that fail on purpose (twilio.com/docs/iam/test-credentials).
const MAGIC_INVALID_TO: &str = "+15005550001";
const MAGIC_UNSUBSCRIBED_TO: &str = "+15005550004";
/// The sender a Messaging Service "picks" when the request names none.
const POOL_SENDER: &str = "+15005550006";

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

/// A delivered message as the fake keeps it.
struct Stored {
    delivery: Delivery,
    created: OffsetDateTime,
    /// Monotonic twin of `created`, for the visibility lag.
    at: Instant,
}

/// The list's records, beside the ledger (which holds only what tests compare).
#[derive(Default)]
pub(super) struct Records(Vec<Stored>);

pub(super) fn router(shared: Arc<Vendor>) -> Router {
    Router::new()
        .route(
            "/2010-04-01/Accounts/{account_sid}/Messages.json",
            post(create).get(list),
        )
        .with_state(shared)
}

async fn create(
    AxumState(shared): AxumState<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    Path(account): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _counted = InFlight::enter(&shared);
    let (fault, answer) = {
        let mut state = shared.lock();
        record(&mut state, "POST", &uri, &headers, &body);
        if !authorized(&shared.config, &headers, &account) {
            return unauthorized();
        }
        let fault = state.send_faults.pop_front();
        let answer = match fault {
            Some(fault) if fault.is_before_processing() => None,
            _ => Some(process_create(&mut state, &account, &body)),
        };
        (fault, answer)
    };
    if answer.is_some() {
        tokio::time::sleep(shared.config.answer_after).await;
    }
    finish(&shared, kill, fault, answer).await
}

/// Counts a create from its receipt until its answer is made (or its connection drops).
struct InFlight<'a>(&'a Vendor);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Vendor) -> Self {
        let mut state = shared.lock();
        state.creates_now += 1;
        state.most_creates_at_once = state.most_creates_at_once.max(state.creates_now);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.lock().creates_now -= 1;
    }
}

async fn list(
    AxumState(shared): AxumState<Arc<Vendor>>,
    Extension(kill): Extension<Kill>,
    Path(account): Path<String>,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let (fault, answer) = {
        let mut state = shared.lock();
        record(&mut state, "GET", &uri, &headers, &[]);
        if !authorized(&shared.config, &headers, &account) {
            return unauthorized();
        }
        let fault = state.lookup_faults.pop_front();
        let answer = match fault {
            Some(fault) if fault.is_before_processing() => None,
            _ => Some(process_list(&shared.config, &state, &account, &uri)),
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
                let mut response = raw_json(StatusCode::TOO_MANY_REQUESTS, RATE_LIMITED_BODY);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                response
            }
            _ => twilio_error(
                StatusCode::SERVICE_UNAVAILABLE,
                20503,
                "Service unavailable",
            ),
        };
    };
    match fault {
        Some(Fault::AcceptThenDrop) => kill.kill().await,
        Some(Fault::Delay) => {
            tokio::time::sleep(shared.config.delay).await;
            answer
        }
        Some(Fault::ErrorAfterProcessing) => twilio_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            20500,
            "An internal server error has occurred",
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
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The account's own SID and token, or its API key, for the account named in the URL.
fn authorized(config: &FakeConfig, headers: &HeaderMap, account: &str) -> bool {
    let Some((user, password)) = basic_credentials(headers) else {
        return false;
    };
    let account_pair = user == config.account_sid && password == config.auth_token.expose_secret();
    let key_pair = config
        .api_key
        .as_ref()
        .is_some_and(|(sid, secret)| user == *sid && password == secret.expose_secret());
    account == config.account_sid && (account_pair || key_pair)
}

fn unauthorized() -> Response {
    let mut response = raw_json(StatusCode::UNAUTHORIZED, UNAUTHORIZED_BODY);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"Twilio API\""),
    );
    response
}

fn raw_json(status: StatusCode, body: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Twilio's error shape: `{"code", "message", "more_info", "status"}`.
fn twilio_error(status: StatusCode, code: u32, message: &str) -> Response {
    let body = json!({
        "code": code,
        "message": message,
        "more_info": format!("https://www.twilio.com/docs/errors/{code}"),
        "status": status.as_u16(),
    });
    (status, axum::Json(body)).into_response()
}

fn form_value<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
        .filter(|value| !value.is_empty())
}

/// E.164: `+`, then 8 to 15 digits (Twilio also takes channel addresses; the fake does not).
fn is_e164(number: &str) -> bool {
    number.strip_prefix('+').is_some_and(|digits| {
        (8..=15).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
    })
}

fn process_create(state: &mut State, account: &str, body: &[u8]) -> Response {
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
    let Some(to) = form_value(&form, "To") else {
        return twilio_error(
            StatusCode::BAD_REQUEST,
            21604,
            "A 'To' phone number is required.",
        );
    };
    let from = form_value(&form, "From");
    let service = form_value(&form, "MessagingServiceSid");
    if from.is_none() && service.is_none() {
        return twilio_error(
            StatusCode::BAD_REQUEST,
            21603,
            "A 'From' or 'MessagingServiceSid' parameter is required to send a message.",
        );
    }
    let Some(text) = form_value(&form, "Body") else {
        return twilio_error(StatusCode::BAD_REQUEST, 21602, "Message body is required.");
    };
    if text.chars().count() > 1600 {
        return twilio_error(
            StatusCode::BAD_REQUEST,
            21617,
            "The concatenated message body exceeds the 1600 character limit.",
        );
    }
    if !is_e164(to) || to == MAGIC_INVALID_TO {
        return twilio_error(
            StatusCode::BAD_REQUEST,
            21211,
            &format!("The 'To' number {to} is not a valid phone number."),
        );
    }
    if to == MAGIC_UNSUBSCRIBED_TO {
        return twilio_error(
            StatusCode::BAD_REQUEST,
            21610,
            "Attempt to send to unsubscribed recipient",
        );
    }
    let created = OffsetDateTime::now_utc();
    let stored = Stored {
        delivery: Delivery {
            sid: format!("SM{}", uuid::Uuid::new_v4().simple()),
            to: to.to_owned(),
            from: from.map(str::to_owned),
            messaging_service_sid: service.map(str::to_owned),
            body: text.to_owned(),
            arrived_at: created,
        },
        created,
        at: Instant::now(),
    };
    let answer = message_json(account, &stored, false);
    state.ledger.deliveries.push(stored.delivery.clone());
    state.records.0.push(stored);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

/// A Message resource. `sent`: as the list shows it once sent, else as just created.
fn message_json(account: &str, stored: &Stored, sent: bool) -> Value {
    let d = &stored.delivery;
    let created = stored.created.format(&Rfc2822).unwrap_or_default();
    let uri = format!("/2010-04-01/Accounts/{account}/Messages/{}", d.sid);
    let from = match (&d.from, sent) {
        (Some(from), _) => Value::from(from.as_str()),
        (None, true) => Value::from(POOL_SENDER),
        (None, false) => Value::Null,
    };
    json!({
        "account_sid": account,
        "api_version": "2010-04-01",
        "body": d.body,
        "date_created": created,
        "date_sent": if sent { Value::from(created.as_str()) } else { Value::Null },
        "date_updated": created,
        "direction": "outbound-api",
        "error_code": null,
        "error_message": null,
        "from": from,
        "messaging_service_sid": d.messaging_service_sid,
        "num_media": "0",
        "num_segments": "1",
        "price": null,
        "price_unit": null,
        "sid": d.sid,
        "status": if sent { "sent" } else { "queued" },
        "subresource_uris": { "media": format!("{uri}/Media.json") },
        "to": d.to,
        "uri": format!("{uri}.json"),
    })
}

/// A `DateSent` filter: the day, and which side of it counts.
enum DayFilter {
    On(time::Date),
    OnOrBefore(time::Date),
    OnOrAfter(time::Date),
}

impl DayFilter {
    fn admits(&self, day: time::Date) -> bool {
        match *self {
            DayFilter::On(d) => day == d,
            DayFilter::OnOrBefore(d) => day <= d,
            DayFilter::OnOrAfter(d) => day >= d,
        }
    }
}

/// `YYYY-MM-DD`, possibly followed by a time (Twilio takes several formats; the fake reads the
/// day, which is all the filter uses).
fn parse_day(value: &str) -> Option<time::Date> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(value.get(..10)?, &format).ok()
}

fn process_list(config: &FakeConfig, state: &State, account: &str, uri: &Uri) -> Response {
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
    let value = |name: &str| form_value(&query, name);
    let mut days = Vec::new();
    for (name, make) in [
        ("DateSent", DayFilter::On as fn(time::Date) -> DayFilter),
        ("DateSent<", DayFilter::OnOrBefore),
        ("DateSent>", DayFilter::OnOrAfter),
    ] {
        if let Some(raw) = value(name) {
            match parse_day(raw) {
                Some(day) => days.push(make(day)),
                None => {
                    return twilio_error(
                        StatusCode::BAD_REQUEST,
                        20001,
                        &format!("Invalid {name}: {raw}"),
                    );
                }
            }
        }
    }
    let page_size = value("PageSize")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(50)
        .clamp(1, config.max_page_size.clamp(1, 1000));
    let page = value("Page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);

    let now = Instant::now();
    let mut visible: Vec<&Stored> = state
        .records
        .0
        .iter()
        .filter(|s| now.duration_since(s.at) >= config.visibility_lag)
        .filter(|s| value("To").is_none_or(|to| s.delivery.to == to))
        .filter(|s| {
            let from = s.delivery.from.as_deref().unwrap_or(POOL_SENDER);
            value("From").is_none_or(|wanted| from == wanted)
        })
        .filter(|s| days.iter().all(|f| f.admits(s.created.date())))
        .collect();
    // Newest first, as Twilio lists.
    visible.reverse();

    let start = page.saturating_mul(page_size);
    let shown: Vec<Value> = visible
        .iter()
        .skip(start)
        .take(page_size)
        .map(|s| message_json(account, s, true))
        .collect();
    let more = start.saturating_add(page_size) < visible.len();

    // The filters, re-encoded the way Twilio writes its paging links.
    let path = uri.path();
    let mut filters = url::form_urlencoded::Serializer::new(String::new());
    for name in ["To", "From", "DateSent", "DateSent<", "DateSent>"] {
        if let Some(v) = value(name) {
            filters.append_pair(name, v);
        }
    }
    let filters = filters.finish();
    let page_uri = |n: usize| format!("{path}?{filters}&PageSize={page_size}&Page={n}");
    let next_page_uri = more.then(|| {
        let token = visible
            .get(start + page_size - 1)
            .map(|s| s.delivery.sid.as_str())
            .unwrap_or_default();
        format!("{}&PageToken=PA{token}", page_uri(page + 1))
    });
    let count = shown.len();
    let body = json!({
        "end": (start + count).saturating_sub(1),
        "first_page_uri": page_uri(0),
        "next_page_uri": next_page_uri,
        "page": page,
        "page_size": page_size,
        "previous_page_uri": (page > 0).then(|| page_uri(page - 1)),
        "messages": shown,
        "start": start,
        "uri": page_uri(page),
    });
    (StatusCode::OK, axum::Json(body)).into_response()
}
