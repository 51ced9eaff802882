//! APNs against herald's conformance kit: each documented answer of `POST /3/device/<token>`, as
//! the crate docs classify it, with the kit's transport faults and its key, look-up and secret
//! checks. The kit's server speaks HTTP/1.1 over plain TCP, which the adapter speaks only to an
//! `http` base URL; over TLS it offers `h2` alone (see `answers.rs` against the fake).

use std::sync::Arc;
use std::time::Duration;

use herald_apns::fake::{FakeConfig, TestKey};
use herald_apns::token::MIN_UPDATE_INTERVAL;
use herald_provider_testkit::{Expect, KEY, Kit, Reply, Subject};

use crate::support::{adapter, message, route_for};

/// A documented answer from `fixtures/apns/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/apns/", $file))
    };
}

/// An error answer: the documented body, as APNs sends it (JSON, with the request's `apns-id`).
fn error(status: u16, body: &str) -> Reply {
    Reply::json(status, body)
}

#[tokio::test]
async fn apns_passes_the_conformance_kit() {
    let config = FakeConfig {
        key: TestKey::generate(),
        ..FakeConfig::default()
    };
    let pem = config.key.private_pem.clone();
    let pem_body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let config = Arc::new(config);
    let build = {
        let config = Arc::clone(&config);
        move |base_url: &str, timeout: Duration| {
            let mut route = route_for(&config, base_url);
            route.timeout = timeout;
            Subject::new(adapter(route), message())
        }
    };
    Kit::new("apns", build)
        .secret(&pem)
        .secret(&pem_body)
        // "If the request was successful, the body of the response is empty"; every answer
        // carries the request's apns-id (the kit's KEY: a UUID, sent as it is).
        .on_every_answer("apns-id", KEY)
        .success(Reply::json(200, ""))
        .rate_limited(error(429, fixture!("errors/too-many-requests.429.json")))
        .case(
            "a 200 naming another apns-id",
            Reply::json(200, "").header("apns-id", "eabeae54-14a8-11e5-b60b-1697f925ec7b"),
            Expect::Ambiguous,
        )
        .case(
            "BadDeviceToken (400)",
            error(400, fixture!("errors/bad-device-token.400.json")),
            Expect::Permanent,
        )
        .case(
            "DeviceTokenNotForTopic (400)",
            error(400, fixture!("errors/device-token-not-for-topic.400.json")),
            Expect::Permanent,
        )
        .case(
            "MissingTopic (400)",
            error(400, fixture!("errors/missing-topic.400.json")),
            Expect::Permanent,
        )
        .case(
            "BadMessageId (400)",
            error(400, fixture!("errors/bad-message-id.400.json")),
            Expect::Permanent,
        )
        .case(
            "BadCollapseId (400)",
            error(400, fixture!("errors/bad-collapse-id.400.json")),
            Expect::Permanent,
        )
        .case(
            "BadPriority (400)",
            error(400, fixture!("errors/bad-priority.400.json")),
            Expect::Permanent,
        )
        .case(
            "BadExpirationDate (400)",
            error(400, fixture!("errors/bad-expiration-date.400.json")),
            Expect::Permanent,
        )
        .case(
            "InvalidPushType (400)",
            error(400, fixture!("errors/invalid-push-type.400.json")),
            Expect::Permanent,
        )
        .case(
            "PayloadEmpty (400)",
            error(400, fixture!("errors/payload-empty.400.json")),
            Expect::Permanent,
        )
        // Refused again after one resend with a new token: the route's credential.
        .case(
            "ExpiredProviderToken (403)",
            error(403, fixture!("errors/expired-provider-token.403.json")),
            Expect::Permanent,
        )
        .case(
            "InvalidProviderToken (403)",
            error(403, fixture!("errors/invalid-provider-token.403.json")),
            Expect::Permanent,
        )
        .case(
            "MissingProviderToken (403)",
            error(403, fixture!("errors/missing-provider-token.403.json")),
            Expect::Permanent,
        )
        .case(
            "Forbidden (403)",
            error(403, fixture!("errors/forbidden.403.json")),
            Expect::Permanent,
        )
        .case(
            "BadPath (404)",
            error(404, fixture!("errors/bad-path.404.json")),
            Expect::Permanent,
        )
        .case(
            "MethodNotAllowed (405)",
            error(405, fixture!("errors/method-not-allowed.405.json")),
            Expect::Permanent,
        )
        .case(
            "Unregistered (410)",
            error(410, fixture!("errors/unregistered.410.json")),
            Expect::Permanent,
        )
        .case(
            "ExpiredToken (410)",
            error(410, fixture!("errors/expired-token.410.json")),
            Expect::Permanent,
        )
        .case(
            "PayloadTooLarge (413)",
            error(413, fixture!("errors/payload-too-large.413.json")),
            Expect::Permanent,
        )
        .case(
            "TooManyProviderTokenUpdates (429)",
            error(
                429,
                fixture!("errors/too-many-provider-token-updates.429.json"),
            ),
            Expect::RetryAfter {
                wait: MIN_UPDATE_INTERVAL,
                slack: Duration::ZERO,
            },
        )
        .case(
            "InternalServerError (500)",
            error(500, fixture!("errors/internal-server-error.500.json")),
            Expect::Ambiguous,
        )
        .case(
            "ServiceUnavailable (503)",
            error(503, fixture!("errors/service-unavailable.503.json")),
            Expect::Ambiguous,
        )
        .case(
            "Shutdown (503)",
            error(503, fixture!("errors/shutdown.503.json")),
            Expect::Ambiguous,
        )
        .vendor_code("documented rate limit", "TooManyRequests")
        .vendor_code("BadDeviceToken (400)", "BadDeviceToken")
        .vendor_code("DeviceTokenNotForTopic (400)", "DeviceTokenNotForTopic")
        .vendor_code("ExpiredProviderToken (403)", "ExpiredProviderToken")
        .vendor_code("InvalidProviderToken (403)", "InvalidProviderToken")
        .vendor_code("Unregistered (410)", "Unregistered")
        .vendor_code("ExpiredToken (410)", "ExpiredToken")
        .vendor_code(
            "TooManyProviderTokenUpdates (429)",
            "TooManyProviderTokenUpdates",
        )
        .vendor_code("InternalServerError (500)", "InternalServerError")
        .vendor_code("ServiceUnavailable (503)", "ServiceUnavailable")
        .vendor_code("Shutdown (503)", "Shutdown")
        .run()
        .await
        .assert_honest();
}
