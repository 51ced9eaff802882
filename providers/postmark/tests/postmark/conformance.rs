//! Postmark against herald's conformance kit: each documented answer of `POST /email` and of the
//! outbound search, as the crate docs classify them, with the kit's transport faults and its
//! key, look-up and secret checks.

use herald_provider_testkit::{Expect, ExpectQuery, KEY, Kit, Reply, Subject};
use serde_json::Value;

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/postmark/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/postmark/", $file))
    };
}

const CANARY: &str = "pm-canary-secret-7f3a";

/// The documented listed message's `MessageID`.
const LISTED_ID: &str = "0a129aee-e1cd-480d-b08d-4f48548ff48d";

/// The documented search answer, its one message under each key of `keys` in turn, the first
/// with the documented `MessageID`.
fn listing(keys: &[&str]) -> Reply {
    let mut list: Value = serde_json::from_str(fixture!("messages-outbound.response.json"))
        .expect("the fixture is JSON");
    let documented = list["Messages"][0].clone();
    let messages: Vec<Value> = keys
        .iter()
        .enumerate()
        .map(|(nth, key)| {
            let mut message = documented.clone();
            message["Metadata"]["herald_key"] = (*key).into();
            if nth > 0 {
                message["MessageID"] = format!("{nth}a129aee-e1cd-480d-b08d-4f48548ff48d").into();
            }
            message
        })
        .collect();
    list["TotalCount"] = messages.len().into();
    list["Messages"] = Value::Array(messages);
    Reply::json(200, list.to_string())
}

#[tokio::test]
async fn postmark_passes_the_conformance_kit() {
    Kit::new("postmark", |base_url, timeout| {
        let mut route = route(base_url, CANARY);
        route.timeout = timeout;
        Subject::new(adapter(&route), message())
    })
    .secret(CANARY)
    .success(Reply::json(200, fixture!("send-email.response.json")))
    .rate_limited(
        Reply::json(429, fixture!("errors/rate_limit_429.json")).header("retry-after", "1"),
    )
    .case(
        "a 200 with another ErrorCode",
        Reply::json(
            200,
            r#"{"ErrorCode": 300, "Message": "Invalid email request"}"#,
        ),
        Expect::Ambiguous,
    )
    .case(
        "bad or missing token, 10 (401)",
        Reply::json(401, fixture!("errors/bad_token_401.json")),
        Expect::Permanent,
    )
    .case(
        "invalid email request, 300 (422)",
        Reply::json(422, fixture!("errors/invalid_request_422.json")),
        Expect::Permanent,
    )
    .case(
        "sender signature not found, 400 (422)",
        Reply::json(422, fixture!("errors/sender_signature_422.json")),
        Expect::Permanent,
    )
    .case(
        "inactive recipient, 406 (422)",
        Reply::json(422, fixture!("errors/inactive_recipient_422.json")),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        Reply::json(500, fixture!("errors/internal_error_500.json")),
        Expect::Ambiguous,
    )
    .case(
        "maintenance (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .vendor_code("bad or missing token, 10 (401)", "10")
    .vendor_code("inactive recipient, 406 (422)", "406")
    // The look-up: `GET /messages/outbound?count=50&offset=0&metadata_herald_key=<key>`.
    .lookup_case(
        "our message listed (200)",
        listing(&[KEY]),
        ExpectQuery::Accepted {
            provider_ref: Some(LISTED_ID.to_owned()),
        },
    )
    .lookup_case(
        "our key on two messages (200)",
        listing(&[KEY, KEY]),
        ExpectQuery::Accepted {
            provider_ref: Some(LISTED_ID.to_owned()),
        },
    )
    .lookup_case(
        "no message listed (200)",
        Reply::json(200, r#"{"TotalCount": 0, "Messages": []}"#),
        ExpectQuery::NotFoundYet,
    )
    .lookup_case(
        "a message under another key (200)",
        listing(&["0190f3a5-7c1e-7a4b-9d2e-3f5a6b7c8d9e"]),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "our message and one under another key (200)",
        listing(&[KEY, "another-key"]),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "a count but no message (200)",
        Reply::json(200, r#"{"TotalCount": 3, "Messages": []}"#),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "look-up with a bad token, 10 (401)",
        Reply::json(401, fixture!("errors/bad_token_401.json")),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "too many calls (429)",
        Reply::json(429, fixture!("errors/rate_limit_429.json")),
        ExpectQuery::Unsupported,
    )
    .run()
    .await
    .assert_honest();
}
