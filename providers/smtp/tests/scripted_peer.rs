//! The adapter against the scripted peer (`herald_smtp::fake`) over real loopback TCP: every
//! refusal a server may send at each step, and the faults around the final dot that a real
//! server will not produce on demand.

mod support;

use std::time::{Duration, Instant};

use herald_provider::{Adapter, ProviderKey};
use herald_smtp::fake::{self, FakeSmtp, Script, Step};
use herald_smtp::{SmtpAdapter, SmtpError, SmtpRoute, Tls, message_id};
use secrecy::SecretString;
use serde::Deserialize;
use support::*;

const REPLIES: &str = include_str!("../../../fixtures/smtp/replies.json");

#[derive(Deserialize)]
struct Replies {
    accepted: Vec<Reply>,
    refusals: Vec<Reply>,
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default)]
    step: String,
    code: u16,
    text: String,
}

fn adapter_for(peer: &FakeSmtp) -> SmtpAdapter {
    SmtpAdapter::new(route_for(peer)).expect("a valid route")
}

fn route_for(peer: &FakeSmtp) -> SmtpRoute {
    route("127.0.0.1", peer.addr().port())
}

fn key(id: &str) -> ProviderKey {
    ProviderKey::new(id)
}

#[tokio::test]
async fn a_message_the_server_queues_is_accepted_with_its_queue_id_and_message_id() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let result = adapter_for(&peer).send(&email("n-1"), &key("n-1")).await;

    let (queue_id, evidence) = assert_accepted(&result);
    assert_eq!(queue_id, "2.0.0 Ok: queued as FAKE1");
    assert_eq!(evidence.vendor_code.as_deref(), Some("2.0.0"));
    assert!(
        evidence.detail.contains("<n-1@herald.invalid>"),
        "{evidence:?}"
    );

    let received = peer.ledger().messages();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].mail_from, "FROM:<herald@example.com>");
    assert_eq!(received[0].rcpt_to, vec!["TO:<ada@example.com>".to_owned()]);
    assert_eq!(
        received[0].message_id.as_deref(),
        Some("<n-1@herald.invalid>")
    );
    assert!(
        received[0]
            .content
            .contains("Subject: Your export is ready\r\n")
    );
}

#[tokio::test]
async fn the_queue_id_of_a_documented_250_becomes_the_provider_ref() {
    let replies: Replies = serde_json::from_str(REPLIES).unwrap();
    for reply in replies.accepted {
        let peer = fake::spawn(Script::reply(Step::AfterDot, reply.code, &reply.text))
            .await
            .unwrap();
        let result = adapter_for(&peer).send(&email("n-1"), &key("n-1")).await;
        let (queue_id, _) = assert_accepted(&result);
        assert_eq!(queue_id, reply.text);
    }
}

#[tokio::test]
async fn every_resend_of_a_notification_carries_the_same_message_id() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let adapter = adapter_for(&peer);
    for _ in 0..2 {
        assert_accepted(&adapter.send(&email("n-7"), &key("n-7")).await);
    }
    assert_accepted(&adapter.send(&email("n-8"), &key("n-8")).await);

    let ledger = peer.ledger();
    assert_eq!(ledger.deliveries_of(&message_id("n-7")), 2);
    assert_eq!(ledger.deliveries_of(&message_id("n-8")), 1);
}

/// Long enough that a refusal which waited for it could not be mistaken for an answer.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn every_documented_refusal_before_or_after_the_dot_is_a_rejection_by_its_class() {
    let replies: Replies = serde_json::from_str(REPLIES).unwrap();
    for reply in replies.refusals {
        let (step, stage) = match reply.step.as_str() {
            "greeting" => (Step::Greeting, "greeting"),
            "ehlo" => (Step::Ehlo, "ehlo"),
            "mail_from" => (Step::MailFrom, "mail_from"),
            "rcpt_to" => (Step::RcptTo, "rcpt_to"),
            "data" => (Step::Data, "data"),
            "after_dot" => (Step::AfterDot, "after_data"),
            other => panic!("unknown step {other} in the fixture"),
        };
        let peer = fake::spawn(Script::reply(step, reply.code, &reply.text))
            .await
            .unwrap();
        let mut route = route_for(&peer);
        route.timeout = REFUSAL_TIMEOUT;
        let started = Instant::now();
        let result = SmtpAdapter::new(route)
            .unwrap()
            .send(&email("n-1"), &key("n-1"))
            .await;

        let what = format!("{} {} at {}", reply.code, reply.text, reply.step);
        let evidence = assert_rejected(&result, reply.code >= 500, stage);
        assert_eq!(evidence.status, Some(reply.code), "{what}");
        let enhanced = reply.text.split_whitespace().next();
        assert_eq!(evidence.vendor_code.as_deref(), enhanced, "{what}");
        assert!(
            evidence.detail.contains(&reply.text),
            "{what}: {evidence:?}"
        );
        assert!(
            evidence.detail.contains("<n-1@herald.invalid>"),
            "{what}: {evidence:?}"
        );
        assert_eq!(peer.ledger().messages().len(), 0, "{what}");
        // A refusal is answered at once: none of them waits out the route's (long) timeout.
        // Half of it leaves a loaded machine plenty of room; this is no speed test.
        assert!(started.elapsed() < REFUSAL_TIMEOUT / 2, "{what}");
    }
}

#[tokio::test]
async fn a_connection_dropped_after_the_final_dot_is_ambiguous() {
    let peer = fake::spawn(Script::DropAfterDot).await.unwrap();
    let result = adapter_for(&peer).send(&email("n-1"), &key("n-1")).await;

    let evidence = assert_ambiguous(&result, "after_data");
    assert!(
        evidence.detail.contains("<n-1@herald.invalid>"),
        "{evidence:?}"
    );
    // The peer did receive the whole message: exactly the duplicate RFC 1047 warns about.
    assert_eq!(peer.ledger().deliveries_of(&message_id("n-1")), 1);
}

#[tokio::test]
async fn a_reply_that_never_comes_after_the_dot_is_ambiguous_within_the_route_timeout() {
    let peer = fake::spawn(Script::SilentAfterDot).await.unwrap();
    let mut route = route_for(&peer);
    route.timeout = Duration::from_millis(500);
    let adapter = SmtpAdapter::new(route).unwrap();

    let started = Instant::now();
    let result = adapter.send(&email("n-1"), &key("n-1")).await;
    let took = started.elapsed();

    let evidence = assert_ambiguous(&result, "after_data");
    assert!(evidence.detail.contains("500ms"), "{evidence:?}");
    assert!(took >= Duration::from_millis(500), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(peer.ledger().deliveries_of(&message_id("n-1")), 1);
}

#[tokio::test]
async fn a_server_that_stops_reading_the_content_is_a_transient_rejection_since_the_dot_never_left()
{
    let peer = fake::spawn(Script::StallInContent).await.unwrap();
    let mut route = route_for(&peer);
    route.timeout = Duration::from_secs(1);
    let adapter = SmtpAdapter::new(route).unwrap();
    // Larger than what the kernel buffers on loopback (send buffer ≤ 4 MiB by default, and the
    // peer's receive window stays small because it never reads), so the client's writes stall.
    let mut message = email("n-1");
    message.text = Some(format!("{}\r\n", "x".repeat(76)).repeat(160_000));
    message.html = None;

    let started = Instant::now();
    let result = adapter.send(&message, &key("n-1")).await;

    let evidence = assert_rejected(&result, false, "data_content");
    assert!(
        evidence.detail.contains("the final dot was not sent"),
        "{evidence:?}"
    );
    // The 1 s deadline ended the stalled write (building 12 MB takes its own time on a loaded
    // machine, so the bound is loose: it tells "ended by the deadline" from "hung").
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(peer.ledger().messages().len(), 0);
}

#[tokio::test]
async fn a_refused_connection_is_a_transient_rejection() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let adapter = SmtpAdapter::new(route("127.0.0.1", port)).unwrap();

    let result = adapter.send(&email("n-1"), &key("n-1")).await;

    let evidence = assert_rejected(&result, false, "connect");
    assert!(evidence.detail.contains("refused"), "{evidence:?}");
}

#[tokio::test]
async fn a_server_that_never_greets_is_a_transient_rejection_at_the_greeting() {
    // Accepts the connection and says nothing.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let holder = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(socket);
    });
    let mut route = route("127.0.0.1", port);
    route.timeout = Duration::from_millis(300);

    let result = SmtpAdapter::new(route)
        .unwrap()
        .send(&email("n-1"), &key("n-1"))
        .await;
    holder.abort();

    let evidence = assert_rejected(&result, false, "greeting");
    assert!(
        evidence.detail.contains("the final dot was not sent"),
        "{evidence:?}"
    );
}

#[tokio::test]
async fn a_message_that_cannot_be_built_is_refused_without_a_connection() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let mut message = email("n-1");
    message.to = "not an address".to_owned();

    let result = adapter_for(&peer).send(&message, &key("n-1")).await;

    assert_rejected(&result, true, "compose");
    assert_eq!(peer.ledger().messages().len(), 0);
}

#[tokio::test]
async fn text_only_and_html_only_messages_are_single_parts() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let adapter = adapter_for(&peer);
    let mut text_only = email("n-text");
    text_only.html = None;
    let mut html_only = email("n-html");
    html_only.text = None;
    assert_accepted(&adapter.send(&text_only, &key("n-text")).await);
    assert_accepted(&adapter.send(&html_only, &key("n-html")).await);

    let received = peer.ledger().messages();
    assert!(received[0].content.contains("Content-Type: text/plain"));
    assert!(!received[0].content.contains("multipart"));
    assert!(received[1].content.contains("Content-Type: text/html"));
    assert!(!received[1].content.contains("multipart"));
}

#[tokio::test]
async fn the_canary_password_appears_in_no_evidence_error_or_debug_output() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let mut route = route_for(&peer);
    route.username = Some("herald".to_owned());
    route.password = Some(SecretString::from(CANARY));
    assert!(!format!("{route:?}").contains(CANARY));
    let adapter = SmtpAdapter::new(route.clone()).unwrap();
    assert!(!format!("{adapter:?}").contains(CANARY));

    // The scripted peer offers no AUTH, so lettre refuses before sending anything.
    let result = adapter.send(&email("n-1"), &key("n-1")).await;
    let evidence = assert_rejected(&result, true, "auth");
    assert!(!format!("{result:?}").contains(CANARY), "{evidence:?}");
    assert_eq!(peer.ledger().messages().len(), 0);

    // Nor in the start-up errors of a route that carries it.
    let mut cleartext = route.clone();
    cleartext.host = "smtp.example.com".to_owned();
    let err = SmtpAdapter::new(cleartext).unwrap_err();
    assert!(!format!("{err} {err:?}").contains(CANARY));
}

/// A route that `new` must refuse, and the error it must give.
type BadRoute = (&'static str, SmtpRoute, fn(&SmtpError) -> bool);

#[test]
fn routes_that_cannot_work_are_refused_at_start_up() {
    let good = route("smtp.example.com", 587);
    let cases: Vec<BadRoute> = vec![
        (
            "empty host",
            SmtpRoute {
                host: " ".into(),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::EmptyHost),
        ),
        (
            "zero timeout",
            SmtpRoute {
                timeout: Duration::ZERO,
                ..good.clone()
            },
            |e| matches!(e, SmtpError::ZeroTimeout),
        ),
        (
            "bad from",
            SmtpRoute {
                from: "herald".into(),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::From(_)),
        ),
        (
            "injected from",
            SmtpRoute {
                from: "a@example.com\r\nBcc: eve@example.com".into(),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::From(_)),
        ),
        (
            "bad hello name",
            SmtpRoute {
                hello_name: Some("two words".into()),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::HelloName(_)),
        ),
        (
            "half credentials",
            SmtpRoute {
                username: Some("herald".into()),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::HalfCredentials),
        ),
        (
            "credentials in clear text",
            SmtpRoute {
                username: Some("herald".into()),
                password: Some(SecretString::from(CANARY)),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::CleartextCredentials(_)),
        ),
        (
            "not a PEM certificate",
            SmtpRoute {
                tls: Tls::StartTls,
                extra_root_certificate_pem: Some("hello".into()),
                ..good.clone()
            },
            |e| matches!(e, SmtpError::Certificate(_)),
        ),
    ];
    for (what, route, expected) in cases {
        match SmtpAdapter::new(route) {
            Err(err) => assert!(expected(&err), "{what}: {err:?}"),
            Ok(adapter) => panic!("{what}: accepted {adapter:?}"),
        }
    }
    // Credentials without TLS are fine to a loopback relay, and the defaults are the usual ports.
    let mut local = route("127.0.0.1", 25);
    local.username = Some("herald".into());
    local.password = Some(SecretString::from(CANARY));
    assert!(SmtpAdapter::new(local).is_ok());
    assert_eq!(Tls::StartTls.default_port(), 587);
    assert_eq!(Tls::Implicit.default_port(), 465);
}

#[tokio::test]
async fn the_adapter_declares_no_idempotency_key_and_no_query() {
    let peer = fake::spawn(Script::Accept).await.unwrap();
    let adapter = adapter_for(&peer);
    let capabilities = adapter.capabilities();
    assert_eq!(capabilities.idempotency_window, None);
    assert_eq!(capabilities.query_visibility_lag, None);
    assert!(matches!(
        adapter.query(&email("n-1"), &key("n-1")).await,
        herald_provider::QueryResult::Unsupported { .. }
    ));
}
