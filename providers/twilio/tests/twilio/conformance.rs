//! Twilio against herald's conformance kit: each documented answer of the Message resource, to
//! a send and to the look-up, as the crate docs classify it, with the kit's transport faults and
//! its key, look-up and secret checks.

use std::time::Duration;

use herald_provider_testkit::{Expect, ExpectQuery, Kit, Reply, Subject};
use herald_twilio::{TwilioAdapter, TwilioRoute};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc2822;

use crate::support::{FROM, TO, TOKEN, route, sms};

/// The text of the kit's message.
const TEXT: &str = "Your code is 123456";

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

/// The documented full page of the Messages list (`list_response.json`) with `messages` in
/// place of its own, and no next page: the whole list, as the look-up reads it.
fn listing(messages: Vec<Value>) -> Reply {
    let mut page: Value =
        serde_json::from_str(fixture!("list_response.json")).expect("the fixture is JSON");
    page["messages"] = Value::Array(messages);
    page["next_page_uri"] = Value::Null;
    Reply::json(200, page.to_string())
}

/// The documented page's messages, as listed: neither is from the route's sender to the kit's
/// number (one is inbound), and both are from 2019.
fn documented_messages() -> Vec<Value> {
    let page: Value =
        serde_json::from_str(fixture!("list_response.json")).expect("the fixture is JSON");
    page["messages"].as_array().expect("a list").clone()
}

/// The documented page's outbound message as `sid`, sent by the route's sender to the kit's
/// number with `body` (`None`: redacted), created `ago` before now. The kit's notification is
/// created when its case is played, later than this, so a small `ago` falls inside the window
/// the look-up searches (the notification's creation less ten minutes of clock skew).
fn sent(sid: &str, body: Option<&str>, ago: Duration) -> Value {
    let mut message = documented_messages()[0].clone();
    let created = (OffsetDateTime::now_utc() - ago)
        .format(&Rfc2822)
        .expect("an RFC 2822 date");
    message["sid"] = sid.into();
    message["from"] = FROM.into();
    message["to"] = TO.into();
    message["body"] = body.into();
    for date in ["date_created", "date_sent", "date_updated"] {
        message[date] = created.clone().into();
    }
    message
}

#[tokio::test]
async fn twilio_passes_the_conformance_kit() {
    const OLDER: &str = "SM00000000000000000000000000000001";
    const NEWER: &str = "SM00000000000000000000000000000002";
    const MINUTE: Duration = Duration::from_secs(60);
    let [outbound, inbound] = <[Value; 2]>::try_from(documented_messages()).expect("two messages");
    Kit::new("twilio", |base_url, timeout| {
        let route = TwilioRoute {
            timeout,
            ..route(base_url.to_owned())
        };
        let adapter = TwilioAdapter::new(route).expect("a valid route");
        Subject::new(adapter, sms(TEXT))
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
    // The look-up: `GET …/Messages.json?To=&From=&DateSent>=&PageSize=`, newest first.
    .lookup_case(
        "our text listed twice, among others (200)",
        listing(vec![
            sent(NEWER, Some(TEXT), MINUTE),
            inbound.clone(),
            sent(OLDER, Some(TEXT), 2 * MINUTE),
        ]),
        ExpectQuery::LookAlikes {
            refs: vec![OLDER.to_owned(), NEWER.to_owned()],
        },
    )
    .lookup_case(
        "no message listed (200)",
        Reply::json(200, fixture!("list_empty_response.json")),
        ExpectQuery::NotFoundYet,
    )
    .lookup_case(
        "only other texts and others' messages listed (200)",
        listing(vec![
            sent(NEWER, Some("Your code is 654321"), MINUTE),
            outbound,
            inbound.clone(),
        ]),
        ExpectQuery::NotFoundYet,
    )
    .lookup_case(
        "our text, created a day before the notification (200)",
        listing(vec![sent(OLDER, Some(TEXT), 24 * 60 * MINUTE)]),
        ExpectQuery::NotFoundYet,
    )
    .lookup_case(
        "a message to this number with its text redacted (200)",
        listing(vec![sent(NEWER, None, MINUTE), inbound]),
        ExpectQuery::Unsupported,
    )
    // The documented full page as it is: its `next_page_uri` leads to itself again and again.
    .lookup_case(
        "more pages than the look-up reads (200)",
        Reply::json(200, fixture!("list_response.json")),
        ExpectQuery::Unsupported,
    )
    .lookup_case(
        "look-up with wrong credentials, 20003 (401)",
        Reply::json(401, fixture!("error_20003.json")),
        ExpectQuery::Unsupported,
    )
    .vendor_code("documented rate limit", "20429")
    .vendor_code("invalid To, 21211 (400)", "21211")
    .vendor_code("recipient replied STOP, 21610 (400)", "21610")
    .vendor_code("wrong credentials, 20003 (401)", "20003")
    .run()
    .await
    .assert_honest();
}
