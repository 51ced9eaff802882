//! The SSRF guard: without `allow_private_networks`, a webhook to a non-public address is
//! refused for good before any connection is made, whether the URL names the address or a
//! host that resolves to it.

use herald_provider::{Adapter, SendResult};
use herald_webhook::WebhookRoute;

use crate::support::{adapter, key, message, receiver, route, secret};

fn guarded() -> WebhookRoute {
    WebhookRoute {
        allow_private_networks: false,
        ..route(&[&secret(1)])
    }
}

/// Asserts a permanent refusal at the destination check, and returns its detail.
fn refused(result: SendResult) -> String {
    match result {
        SendResult::Rejected {
            permanent,
            retry_after,
            evidence,
        } => {
            assert!(permanent, "{evidence:?}");
            assert_eq!(retry_after, None);
            assert_eq!(evidence.stage, "destination", "{evidence:?}");
            assert_eq!(evidence.status, None);
            evidence.detail
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn loopback_receivers_are_refused_without_a_connection() {
    let receiver = receiver(&[&secret(1)]).await;
    let port = receiver.addr().port();
    let adapter = adapter(guarded());

    for (host, reason) in [
        ("127.0.0.1", "loopback"),
        ("[::1]", "loopback"),
        ("[::ffff:127.0.0.1]", "loopback"),
        // The WHATWG URL parser reads a bare number as an IPv4 address: 127.0.0.1.
        ("2130706433", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("localhost", "loopback"),
    ] {
        let detail = refused(
            adapter
                .send(&message(format!("http://{host}:{port}/h")), &key())
                .await,
        );
        assert!(detail.contains(reason), "{host}: {detail}");
        assert!(
            detail.contains("refused without connecting"),
            "{host}: {detail}"
        );
    }
    let ledger = receiver.ledger();
    assert_eq!(ledger.connections, 0, "the receiver was reached");
    assert!(ledger.requests.is_empty());
}

#[tokio::test]
async fn a_hostname_that_resolves_to_loopback_is_refused_by_what_it_resolves_to() {
    let receiver = receiver(&[&secret(1)]).await;
    let detail = refused(
        adapter(guarded())
            .send(
                &message(format!("http://localhost:{}/h", receiver.addr().port())),
                &key(),
            )
            .await,
    );
    assert!(detail.contains("localhost resolves to"), "{detail}");
    assert_eq!(receiver.ledger().connections, 0);
}

#[tokio::test]
async fn private_and_metadata_addresses_are_refused() {
    let adapter = adapter(guarded());
    for (url, reason) in [
        ("http://10.0.0.1/h", "private"),
        ("https://192.168.1.20/h", "private"),
        ("http://172.16.0.1/h", "private"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[fe80::1]/h", "link-local"),
        ("http://[fd00::1]/h", "unique local"),
        ("http://100.64.0.1/h", "carrier-grade NAT"),
        ("http://224.0.0.1/h", "multicast"),
        ("http://255.255.255.255/h", "broadcast"),
    ] {
        let detail = refused(adapter.send(&message(url), &key()).await);
        assert!(detail.contains(reason), "{url}: {detail}");
    }
}

#[tokio::test]
async fn a_route_that_allows_private_networks_reaches_a_loopback_receiver_by_name() {
    let s1 = secret(1);
    let receiver = receiver(&[&s1]).await;
    let key = key();
    let result = adapter(route(&[&s1]))
        .send(
            &message(format!("http://localhost:{}/h", receiver.addr().port())),
            &key,
        )
        .await;
    assert!(matches!(result, SendResult::Accepted { .. }), "{result:?}");
    assert_eq!(receiver.ledger().deliveries_of(key.as_str()), 1);
}
