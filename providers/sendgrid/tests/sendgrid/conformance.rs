//! SendGrid against herald's conformance kit: each documented answer of Mail Send and of the
//! Email Activity filter, as the crate docs classify them, with the kit's transport faults and
//! its key, look-up and secret checks — once with Email Activity, once without (no look-up
//! declared, none made).

use std::time::Duration;

use herald_provider_testkit::{Expect, ExpectQuery, Kit, Reply, Subject};

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/sendgrid/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/sendgrid/", $file))
    };
}

const CANARY: &str = "SG.canary-secret-7f3a";

/// The documented listed message's id, up to its first `.`: the `X-Message-Id` of the send.
const LISTED_ID: &str = "14c5d75ce93";

fn kit(activity: bool) -> Kit {
    Kit::new("sendgrid", move |base_url, timeout| {
        let mut route = route(base_url, CANARY);
        route.timeout = timeout;
        route.activity_lookup = activity.then_some(Duration::from_secs(60));
        Subject::new(adapter(&route), message())
    })
    .secret(CANARY)
    .success(Reply::text(202, "").header("x-message-id", "14c5d75ce93"))
    .rate_limited(
        Reply::json(429, fixture!("errors/too_many_requests_429.json")).header("retry-after", "1"),
    )
    .case(
        "valid but not queued, sandbox mode (200)",
        Reply::text(200, ""),
        Expect::Permanent,
    )
    .case(
        "a missing subject (400)",
        Reply::json(400, fixture!("errors/bad_request_400.json")),
        Expect::Permanent,
    )
    .case(
        "unauthorized (401)",
        Reply::json(401, fixture!("errors/unauthorized_401.json")),
        Expect::Permanent,
    )
    .case(
        "forbidden (403)",
        Reply::json(403, fixture!("errors/forbidden_403.json")),
        Expect::Permanent,
    )
    .case(
        "payload too large (413)",
        Reply::text(413, "Payload Too Large"),
        Expect::Permanent,
    )
    .case(
        "internal error (500)",
        Reply::json(500, fixture!("errors/internal_error_500.json")),
        Expect::Ambiguous,
    )
    .case(
        "unavailable (503)",
        Reply::text(503, "Service Unavailable"),
        Expect::Ambiguous,
    )
}

#[tokio::test]
async fn sendgrid_with_email_activity_passes_the_conformance_kit() {
    kit(true)
        .lookup_case(
            "our message listed (200)",
            Reply::json(200, fixture!("messages.response.json")),
            ExpectQuery::Accepted {
                provider_ref: Some(LISTED_ID.to_owned()),
            },
        )
        .lookup_case(
            "no message listed (200)",
            Reply::json(200, r#"{"messages": []}"#),
            ExpectQuery::NotFoundYet,
        )
        .lookup_case(
            "no Email Activity on the account (403)",
            Reply::json(403, fixture!("errors/forbidden_403.json")),
            ExpectQuery::Unsupported,
        )
        .lookup_case(
            "too many requests (429)",
            Reply::json(429, fixture!("errors/too_many_requests_429.json")),
            ExpectQuery::Unsupported,
        )
        .run()
        .await
        .assert_honest();
}

#[tokio::test]
async fn sendgrid_without_email_activity_passes_the_conformance_kit() {
    kit(false).run().await.assert_honest();
}
