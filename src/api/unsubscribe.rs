//! One-click unsubscribe (RFC 8058): the link in an email's `List-Unsubscribe` header. A mail
//! provider POSTs `List-Unsubscribe=One-Click` to it when its user clicks "unsubscribe"; that
//! suppresses the recipient for the link's category, with the suppression's audit record. A
//! GET (a person following the link, or a mail scanner checking it) only shows a page that asks,
//! and changes nothing. No bearer token: the link's signature is the authentication.

use axum::Router;
use axum::extract::{FromRequest, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use serde_json::json;
use time::OffsetDateTime;

use super::{AppState, Problem, body_bytes};
use crate::domain::{Channel, Suppression, SuppressionReason, Unsubscribe};
use crate::store::NewSuppression;

pub fn routes() -> Router<AppState> {
    Router::new().route("/v1/unsubscribe/{token}", get(page).post(one_click))
}

// Only the API document's description of the body: the handler reads the raw form, in either
// encoding, and never builds one.
/// RFC 8058's one-click body.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct OneClick {
    #[schema(rename = "List-Unsubscribe", example = "One-Click")]
    list_unsubscribe: String,
}

/// The source and principal of the suppressions it adds.
const PRINCIPAL: &str = "unsubscribe";

/// The longest User-Agent kept as evidence of who clicked.
const MAX_USER_AGENT_CHARS: usize = 200;

/// Unsubscribe the link's recipient from its category: what a mail provider's one-click sends.
#[utoipa::path(post, path = "/v1/unsubscribe/{token}", operation_id = "unsubscribe",
    tag = "unsubscribe",
    params(("token" = String, Path, description = "The signed token of the email's List-Unsubscribe link")),
    request_body(content = OneClick, content_type = "application/x-www-form-urlencoded",
        description = "`List-Unsubscribe=One-Click` (RFC 8058), or the same field as multipart/form-data"),
    responses(
        (status = 200, description = "Unsubscribed (or it was already): a page that says so", content_type = "text/html"),
        (status = 400, description = "The body is not RFC 8058's `List-Unsubscribe=One-Click`; nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "Not a link herald signed (or its secret was retired)", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over the limit", body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "A fault herald logs; nothing changed", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "The database is unavailable; nothing changed", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn one_click(
    State(state): State<AppState>,
    Path(token): Path<String>,
    headers: HeaderMap,
    request: Request,
) -> Result<Response, Problem> {
    // The link first: a token herald did not sign is answered before a byte of its body is read.
    let Some(link) = state.routing.categories().verify(&token) else {
        return Err(Problem::not_found());
    };
    let body = body_bytes(Bytes::from_request(request, &state).await)?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if !asks_one_click(content_type, &body) {
        return Err(Problem::malformed(
            "the body must be List-Unsubscribe=One-Click (RFC 8058)",
        ));
    }
    let user_agent: String = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .chars()
        .take(MAX_USER_AGENT_CHARS)
        .collect();
    state
        .store
        .suppress(&NewSuppression {
            tenant: link.tenant.clone(),
            suppression: Suppression {
                channel: Channel::Email,
                recipient: link.recipient.clone(),
                category: Some(link.category.clone()),
                reason: SuppressionReason::Unsubscribed,
                source: PRINCIPAL.to_owned(),
                evidence: json!({"link": "List-Unsubscribe", "user_agent": user_agent}),
                note: None,
                created_at: OffsetDateTime::now_utc(),
            },
            principal: PRINCIPAL.to_owned(),
        })
        .await?;
    tracing::info!(category = %link.category, "a recipient unsubscribed through a link");
    Ok(html(StatusCode::OK, &link, true))
}

/// A page that asks whether to unsubscribe, with a button that sends the one-click POST. It
/// changes nothing: mail scanners follow every link they see.
#[utoipa::path(get, path = "/v1/unsubscribe/{token}", operation_id = "unsubscribe_page",
    tag = "unsubscribe",
    params(("token" = String, Path, description = "The signed token of the email's List-Unsubscribe link")),
    responses(
        (status = 200, description = "The page, with a button to unsubscribe", content_type = "text/html"),
        (status = 404, description = "Not a link herald signed (or its secret was retired)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn page(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    match state.routing.categories().verify(&token) {
        Some(link) => html(StatusCode::OK, &link, false),
        None => Problem::not_found().into_response(),
    }
}

const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Unsubscribe</title></head>
<body>
{% if done %}<p id="done">{{ recipient }} will receive no more {{ category }} messages.</p>
{% else %}<p>Stop sending {{ category }} messages to {{ recipient }}?</p>
<form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click">
<button id="unsubscribe" type="submit">Unsubscribe</button></form>{% endif %}
</body></html>
"#;

fn html(status: StatusCode, link: &Unsubscribe, done: bool) -> Response {
    let env = minijinja::Environment::new();
    let body = env
        .render_named_str(
            "unsubscribe.html",
            PAGE,
            minijinja::context! {recipient => link.recipient, category => link.category, done},
        )
        .unwrap_or_else(|_| "unsubscribe".to_owned());
    (
        status,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (header::REFERRER_POLICY, "no-referrer"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; form-action 'self'",
            ),
        ],
        body,
    )
        .into_response()
}

/// Whether the body is RFC 8058's `List-Unsubscribe=One-Click`, form-encoded (the default) or
/// as multipart/form-data.
fn asks_one_click(content_type: Option<&str>, body: &[u8]) -> bool {
    let one_click = |name: &str, value: &str| name == "List-Unsubscribe" && value == "One-Click";
    let boundary = content_type
        .filter(|t| t.trim_start().starts_with("multipart/form-data"))
        .and_then(|t| {
            t.split(';')
                .find_map(|p| p.trim().strip_prefix("boundary="))
        })
        .map(|b| b.trim_matches('"'));
    match boundary {
        Some(boundary) => multipart_fields(body, boundary)
            .iter()
            .any(|(n, v)| one_click(n, v)),
        None => url::form_urlencoded::parse(body).any(|(n, v)| one_click(&n, &v)),
    }
}

/// The name and value of each field of a multipart/form-data body.
fn multipart_fields(body: &[u8], boundary: &str) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    let delimiter = format!("--{boundary}");
    text.split(delimiter.as_str())
        .filter_map(|part| {
            let (head, value) = part.split_once("\r\n\r\n")?;
            let name = head
                .split("name=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())?;
            Some((name.to_owned(), value.trim_end_matches("\r\n").to_owned()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::asks_one_click;

    #[test]
    fn the_body_is_rfc_8058_s_in_either_form_encoding() {
        assert!(asks_one_click(None, b"List-Unsubscribe=One-Click"));
        assert!(asks_one_click(
            Some("application/x-www-form-urlencoded"),
            b"List-Unsubscribe=One-Click"
        ));
        let multipart = b"--XyZ\r\nContent-Disposition: form-data; name=\"List-Unsubscribe\"\r\n\r\nOne-Click\r\n--XyZ--\r\n";
        assert!(asks_one_click(
            Some("multipart/form-data; boundary=XyZ"),
            multipart
        ));
        for (content_type, body) in [
            (None, &b""[..]),
            (None, b"List-Unsubscribe=Yes"),
            (None, b"unsubscribe=One-Click"),
            (
                Some("multipart/form-data; boundary=XyZ"),
                b"List-Unsubscribe=One-Click",
            ),
        ] {
            assert!(!asks_one_click(content_type, body), "{body:?}");
        }
    }
}
