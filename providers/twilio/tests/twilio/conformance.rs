//! Twilio against herald's conformance kit: each documented answer of the Message resource, as
//! the crate docs classify it, with the kit's transport faults and its key, look-up and secret
//! checks.

use herald_provider_testkit::{Expect, Kit, Reply, Subject};
use herald_twilio::{TwilioAdapter, TwilioRoute};

use crate::support::{TOKEN, route, sms};

/// A documented answer from `fixtures/twilio/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/twilio/", $file))
    };
}

/// An error in the fixtures' shape with another of Twilio's codes.
fn error(status: u16, code: u32, message: &str) -> Reply {
    let body = serde_json::json!({
        "code": code,
        "message": message,
        "more_info": format!("https://www.twilio.com/docs/errors/{code}"),
        "status": status,
    });
    Reply::json(status, body.to_string())
}

#[tokio::test]
async fn twilio_passes_the_conformance_kit() {
    Kit::new("twilio", |base_url, timeout| {
        let route = TwilioRoute {
            timeout,
            ..route(base_url.to_owned())
        };
        let adapter = TwilioAdapter::new(route).expect("a valid route");
        Subject::new(adapter, sms("Your code is 123456"))
    })
    .secret(TOKEN)
    .success(Reply::json(201, fixture!("create_response.json")))
    .rate_limited(Reply::json(429, fixture!("error_20429.json")).header("retry-after", "1"))
    .case(
        "invalid To, 21211 (400)",
        Reply::json(400, fixture!("error_21211.json")),
        Expect::Permanent,
    )
    .case(
        "recipient replied STOP, 21610 (400)",
        Reply::json(400, fixture!("error_21610.json")),
        Expect::Permanent,
    )
    .case(
        "sender queue full, 21611 (400)",
        error(
            400,
            21611,
            "This 'From' number has exceeded the maximum number of queued messages",
        ),
        Expect::Transient,
    )
    .case(
        "messages per second exceeded, 63017 (400)",
        error(400, 63017, "Rate limit exceeded"),
        Expect::Transient,
    )
    .case(
        "wrong credentials, 20003 (401)",
        Reply::json(401, fixture!("error_20003.json")),
        Expect::Permanent,
    )
    .case(
        "internal error, 20500 (500)",
        error(500, 20500, "Internal Server Error"),
        Expect::Ambiguous,
    )
    .case(
        "service unavailable, 20503 (503)",
        error(503, 20503, "Service Unavailable"),
        Expect::Ambiguous,
    )
    .run()
    .await
    .assert_honest();
}
