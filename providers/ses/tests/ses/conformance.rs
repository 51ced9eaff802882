//! SES against herald's conformance kit: each documented answer of `SendEmail`, as the crate
//! docs classify it, with the kit's transport faults and its key, look-up and secret checks.

use herald_provider_testkit::{Expect, Kit, Reply, Subject};
use herald_ses::fake::FakeConfig;
use secrecy::SecretString;

use crate::support::{adapter, message, route};

/// A documented answer from `fixtures/ses/`.
macro_rules! fixture {
    ($file:literal) => {
        include_str!(concat!("../../../../fixtures/ses/", $file))
    };
}

const CANARY: &str = "canary/Secret+Key7f3aEXAMPLEKEYxxxxxxxx";

/// An error as SES answers it: the status, the type in `x-amzn-ErrorType`, the body.
fn error(status: u16, kind: &str, body: &str) -> Reply {
    Reply::json(status, body).header(
        "x-amzn-errortype",
        format!("{kind}:http://internal.amazon.com/coral/com.amazonaws.ses/"),
    )
}

#[tokio::test]
async fn ses_passes_the_conformance_kit() {
    Kit::new("ses", |base_url, timeout| {
        let mut route = route(base_url, &FakeConfig::default());
        route.secret_access_key = SecretString::from(CANARY);
        route.timeout = timeout;
        Subject::new(adapter(&route), message())
    })
    .secret(CANARY)
    .varies_per_attempt(
        "x-amz-date",
        "Signature Version 4 signs the time of each request",
    )
    .varies_per_attempt("authorization", "the signature covers x-amz-date")
    .success(Reply::json(200, fixture!("send-email.response.json")))
    .rate_limited(error(
        429,
        "TooManyRequestsException",
        fixture!("errors/too_many_requests_429.json"),
    ))
    .case(
        "MessageRejected (400)",
        error(
            400,
            "MessageRejected",
            fixture!("errors/message_rejected_400.json"),
        ),
        Expect::Permanent,
    )
    .case(
        "BadRequestException (400)",
        error(
            400,
            "BadRequestException",
            fixture!("errors/bad_request_400.json"),
        ),
        Expect::Permanent,
    )
    .case(
        "AccountSuspendedException, named in the body (400)",
        Reply::json(400, fixture!("errors/account_suspended_400.json")),
        Expect::Permanent,
    )
    .case(
        "ThrottlingException, the daily quota (400)",
        error(
            400,
            "ThrottlingException",
            fixture!("errors/throttling_400.json"),
        ),
        Expect::Transient,
    )
    .case(
        "a signature that does not match (403)",
        error(
            403,
            "SignatureDoesNotMatch",
            fixture!("errors/signature_does_not_match_403.json"),
        ),
        Expect::Permanent,
    )
    .case(
        "InternalFailure (500)",
        error(
            500,
            "InternalFailure",
            fixture!("errors/internal_failure_500.json"),
        ),
        Expect::Ambiguous,
    )
    .case(
        "ServiceUnavailable (503)",
        error(
            503,
            "ServiceUnavailable",
            "{\"message\":\"Service Unavailable\"}",
        ),
        Expect::Ambiguous,
    )
    .vendor_code("MessageRejected (400)", "MessageRejected")
    .vendor_code(
        "AccountSuspendedException, named in the body (400)",
        "AccountSuspendedException",
    )
    .vendor_code(
        "ThrottlingException, the daily quota (400)",
        "ThrottlingException",
    )
    .vendor_code("InternalFailure (500)", "InternalFailure")
    .run()
    .await
    .assert_honest();
}
