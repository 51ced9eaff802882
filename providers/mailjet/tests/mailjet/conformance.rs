//! Mailjet against herald's conformance kit: each documented answer of Send API v3.1 and of the
//! `/message` look-up, as the crate docs classify them, with the kit's transport faults and its
//! key, look-up and secret checks.

use herald_mailjet::{MailjetAdapter, MailjetRoute};
use herald_provider_testkit::{Expect, ExpectQuery, KEY, Kit, Reply, Subject};
use serde_json::Value;

use crate::support::{SECRET, email, route};

/// A documented answer from `fixtures/mailjet/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/mailjet/", $file))
    };
}

/// A global error in the fixtures' shape, without a code (Mailjet documents none for these).
fn global_error(status: u16, message: &str) -> Reply {
    let body = serde_json::json!({
        "ErrorIdentifier": "0b36a2f7-7f3a-4c1e-9d2e-5f2c1a7b9e10",
        "ErrorMessage": message,
        "StatusCode": status,
    });
    Reply::json(status, body.to_string())
}

/// The documented listed message's `ID`.
const LISTED_ID: &str = "70650219165027410";

/// The documented answer to `GET /v3/REST/message?CustomID=…` (`message_list_response.json`),
/// its one message under each of `custom_ids` in turn, the first with the documented `ID`.
fn listing(custom_ids: &[&str]) -> Reply {
    let mut list: Value =
        serde_json::from_str(fixture!("message_list_response.json")).expect("the fixture is JSON");
    let documented = list["Data"][0].clone();
    let data: Vec<Value> = custom_ids
        .iter()
        .zip(0u64..)
        .map(|(custom_id, nth)| {
            let mut message = documented.clone();
            message["CustomID"] = (*custom_id).into();
            message["ID"] = (70_650_219_165_027_410 + nth).into();
            message
        })
        .collect();
    list["Count"] = data.len().into();
    list["Total"] = data.len().into();
    list["Data"] = Value::Array(data);
    Reply::json(200, list.to_string())
}

#[tokio::test]
async fn mailjet_passes_the_conformance_kit() {
    Kit::new("mailjet", |base_url, timeout| {
        let route = MailjetRoute {
            timeout,
            ..route(base_url.to_owned())
        };
        let adapter = MailjetAdapter::new(route).expect("a valid route");
        Subject::new(adapter, email())
    })
    .secret(SECRET)
    .success(Reply::json(200, fixture!("send_response.json")))
    // "429 Too Many Requests: oops! You have reached the maximum number of calls allowed per
    // minute by our API"; Mailjet documents no Retry-After.
    .rate_limited(global_error(
        429,
        "Oops! You have reached the maximum number of calls allowed per minute by our API.",
    ))
    .case(
        "the message refused inside a 200",
        Reply::json(200, fixture!("send_response_partial_error.json")),
        Expect::Permanent,
    )
    .case(
        "malformed JSON, mj-0002 (400)",
        Reply::json(400, fixture!("error_global_400.json")),
        Expect::Permanent,
    )
    .case(
        "validation errors, mj-0004 and mj-0005 (400)",
        Reply::json(400, fixture!("error_validation_400.json")),
        Expect::Permanent,
    )
    .case(
        "wrong credentials, mj-0015 (401)",
        Reply::json(401, fixture!("error_401.json")),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        global_error(500, "Internal Server Error"),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503)",
        global_error(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    // The look-up: `GET /v3/REST/message?CustomID=<key>&ShowCustomID=true&FromTS=…`.
    .lookup_case(
        "our message listed (200)",
        listing(&[KEY]),
        ExpectQuery::Accepted {
            provider_ref: Some(LISTED_ID.to_owned()),
        },
    )
    .lookup_case(
        "our CustomID on two messages (200)",
        listing(&[KEY, KEY]),
        ExpectQuery::Accepted {
            provider_ref: Some(LISTED_ID.to_owned()),
        },
    )
    .lookup_case(
        "no message listed (200)",
        Reply::json(200, fixture!("message_list_empty_response.json")),
        ExpectQuery::NotFoundYet,
    )
    // The fixture as it is: its message carries the docs' `PassengerEticket1234`.
    .lookup_case(
        "a message under another CustomID (200)",
        Reply::json(200, fixture!("message_list_response.json")),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "our message and one under another CustomID (200)",
        listing(&[KEY, "PassengerEticket1234"]),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "look-up with wrong credentials, mj-0015 (401)",
        Reply::json(401, fixture!("error_401.json")),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "too many calls (429)",
        global_error(
            429,
            "Oops! You have reached the maximum number of calls allowed per minute by our API.",
        ),
        ExpectQuery::Unsupported,
    )
    .run()
    .await
    .assert_honest();
}
