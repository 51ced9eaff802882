//! Each capability profile, as the adapter sees it and as the ledger records it.

use std::time::{Duration, Instant};

use herald_provider::{Adapter, Capabilities, QueryResult, SendResult};
use herald_sandbox::{
    Profile, SandboxAdapter, SandboxConfig, SandboxRoute, adapter::SandboxRouteError, parse_faults,
};

use crate::support::{config, install_crypto_provider, key, message, vendor, vendor_with_timeout};

fn accepted_ref(result: &SendResult) -> String {
    match result {
        SendResult::Accepted {
            provider_ref: Some(id),
            ..
        } => id.clone(),
        other => panic!("expected an acceptance with an id, got {other:?}"),
    }
}

#[tokio::test]
async fn a_repeated_key_is_replayed_with_the_same_id_and_no_new_delivery() {
    let vendor = vendor(config(Profile::Idempotent)).await;
    let key = key();

    let first = vendor.adapter.send(&message(), &key).await;
    let second = vendor.adapter.send(&message(), &key).await;

    assert_eq!(accepted_ref(&first), accepted_ref(&second));
    let SendResult::Accepted { evidence, .. } = &second else {
        unreachable!()
    };
    assert!(
        evidence.detail.starts_with("idempotent replay"),
        "{evidence:?}"
    );
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.requests, 2);
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn history_beyond_its_bound_is_forgotten_and_counted() {
    let vendor = vendor(SandboxConfig {
        history: 3,
        ..config(Profile::Idempotent)
    })
    .await;
    let keys: Vec<_> = (0..5).map(|_| key()).collect();
    for key in &keys {
        accepted_ref(&vendor.adapter.send(&message(), key).await);
    }
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.deliveries.len(), 3, "the 3 most recent: {ledger:?}");
    assert_eq!(ledger.deliveries_of(keys[4].as_str()), 1);
    assert_eq!(ledger.deliveries_of(keys[0].as_str()), 0, "forgotten");
    assert_eq!(
        (
            ledger.forgotten_deliveries,
            ledger.forgotten_keys,
            ledger.total_deliveries()
        ),
        (2, 2, 5),
        "what it forgot is counted"
    );
    // A forgotten key is a new message to the vendor; a kept one is still replayed.
    let again = vendor.adapter.send(&message(), &keys[0]).await;
    assert!(
        !format!("{again:?}").contains("idempotent replay"),
        "{again:?}"
    );
    let kept = vendor.adapter.send(&message(), &keys[4]).await;
    assert!(
        format!("{kept:?}").contains("idempotent replay"),
        "{kept:?}"
    );
    assert_eq!(vendor.ledger.ledger().await.unwrap().total_deliveries(), 6);
}

#[tokio::test]
async fn a_repeat_while_the_first_request_is_in_progress_is_refused_without_delivering() {
    // The first request is held for a minute; its client gives up long before that.
    let vendor = vendor_with_timeout(
        SandboxConfig {
            faults: parse_faults("delay:nth=1").unwrap(),
            delay: Duration::from_secs(60),
            ..config(Profile::Idempotent)
        },
        Duration::from_millis(300),
    )
    .await;
    let key = key();

    let first = vendor.adapter.send(&message(), &key).await;
    let repeat = vendor.adapter.send(&message(), &key).await;

    assert!(matches!(first, SendResult::Ambiguous { .. }), "{first:?}");
    match repeat {
        SendResult::Rejected {
            permanent: false,
            evidence,
            ..
        } => {
            assert_eq!(evidence.status, Some(409));
            assert_eq!(
                evidence.vendor_code.as_deref(),
                Some("concurrent_idempotent_request")
            );
        }
        other => panic!("expected a transient rejection, got {other:?}"),
    }
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        1
    );
}

/// The windows these tests try: a machine too loaded to fit two calls inside one tries the next,
/// so that slowness never fails a test, and never passes one either (each run checks that its
/// calls did fit).
const WINDOWS: [Duration; 4] = [
    Duration::from_secs(1),
    Duration::from_secs(4),
    Duration::from_secs(16),
    Duration::from_secs(64),
];

#[tokio::test]
async fn after_the_idempotency_window_a_repeat_is_a_new_delivery() {
    for window in WINDOWS {
        let vendor = vendor(SandboxConfig {
            idempotency_window: window,
            ..config(Profile::Idempotent)
        })
        .await;
        let key = key();

        let started = Instant::now();
        let first = accepted_ref(&vendor.adapter.send(&message(), &key).await);
        let first_answered = Instant::now();
        let inside = vendor.adapter.send(&message(), &key).await;
        if started.elapsed() >= window {
            continue;
        }
        assert_eq!(accepted_ref(&inside), first);

        // The window is measured from the first processing, which happened before its answer
        // came (on a loaded machine, maybe long after `started`).
        tokio::time::sleep_until((first_answered + window + Duration::from_millis(20)).into())
            .await;
        let after = accepted_ref(&vendor.adapter.send(&message(), &key).await);

        assert_ne!(after, first);
        assert_eq!(
            vendor
                .ledger
                .ledger()
                .await
                .unwrap()
                .deliveries_of(key.as_str()),
            2
        );
        return;
    }
    panic!("no window up to {:?} held two sends", WINDOWS[3]);
}

#[tokio::test]
async fn a_queryable_vendor_shows_a_delivery_only_after_its_visibility_lag() {
    for lag in WINDOWS {
        let vendor = vendor(SandboxConfig {
            visibility_lag: lag,
            ..config(Profile::Queryable)
        })
        .await;
        let key = key();

        let id = accepted_ref(&vendor.adapter.send(&message(), &key).await);
        let sent = Instant::now();
        let early = vendor.adapter.query(&message(), &key).await;
        if sent.elapsed() >= lag {
            continue;
        }
        assert!(
            matches!(early, QueryResult::NotFoundYet { .. }),
            "{early:?}"
        );

        // The delivery was recorded before the send returned, so it is older than `lag` by then.
        tokio::time::sleep_until((sent + lag).into()).await;
        match vendor.adapter.query(&message(), &key).await {
            QueryResult::Accepted { provider_ref, .. } => assert_eq!(provider_ref, Some(id)),
            other => panic!("expected the delivery to be visible, got {other:?}"),
        }
        return;
    }
    panic!("no lag up to {:?} held a send and a query", WINDOWS[3]);
}

#[tokio::test]
async fn a_queryable_vendor_delivers_every_resend_and_the_query_counts_them() {
    let vendor = vendor(config(Profile::Queryable)).await;
    let key = key();

    let first = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    let second = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert_ne!(first, second);

    match vendor.adapter.query(&message(), &key).await {
        QueryResult::Accepted {
            provider_ref,
            evidence,
        } => {
            assert_eq!(provider_ref, Some(first));
            assert!(
                evidence.detail.starts_with("delivered 2 times"),
                "{evidence:?}"
            );
        }
        other => panic!("expected an acceptance, got {other:?}"),
    }
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        2
    );
}

#[tokio::test]
async fn a_plain_vendor_delivers_every_resend_and_has_no_outcome_query() {
    let vendor = vendor(config(Profile::Plain)).await;
    let key = key();

    vendor.adapter.send(&message(), &key).await;
    vendor.adapter.send(&message(), &key).await;

    let asked = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!(
            "{}/messages?reference={key}",
            vendor.handle.base_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(asked.status(), 404);
    assert!(matches!(
        vendor.adapter.query(&message(), &key).await,
        QueryResult::Unsupported { .. }
    ));
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        2
    );
}

#[tokio::test]
async fn each_profile_declares_exactly_its_own_capability() {
    install_crypto_provider();
    let window = Duration::from_secs(3600);
    let lag = Duration::from_secs(2);
    let capabilities = |profile| {
        let adapter = SandboxAdapter::new(SandboxRoute {
            base_url: "http://127.0.0.1:9".to_owned(),
            from: None,
            profile,
            idempotency_window: window,
            visibility_lag: lag,
            timeout: Duration::from_secs(1),
            callback_secret: None,
        });
        let Capabilities {
            idempotency_window,
            query_visibility_lag,
            ..
        } = adapter.capabilities().clone();
        (idempotency_window, query_visibility_lag)
    };
    assert_eq!(capabilities(Profile::Idempotent), (Some(window), None));
    assert_eq!(capabilities(Profile::Queryable), (None, Some(lag)));
    assert_eq!(capabilities(Profile::Plain), (None, None));
}

#[tokio::test]
async fn a_route_with_a_malformed_base_url_is_refused_at_start_up() {
    install_crypto_provider();
    let built = SandboxAdapter::try_new(SandboxRoute {
        base_url: "not a url".to_owned(),
        from: None,
        profile: Profile::Plain,
        idempotency_window: Duration::ZERO,
        visibility_lag: Duration::ZERO,
        timeout: Duration::from_secs(1),
        callback_secret: None,
    });
    assert!(matches!(built, Err(SandboxRouteError::BaseUrl { .. })));
}

#[tokio::test]
async fn an_invalid_message_is_refused_for_good_and_nothing_is_delivered() {
    let vendor = vendor(config(Profile::Idempotent)).await;
    let key = key();
    let mut message = message();
    message.to = String::new();

    match vendor.adapter.send(&message, &key).await {
        SendResult::Rejected {
            permanent: true,
            evidence,
            ..
        } => assert_eq!(evidence.status, Some(422)),
        other => panic!("expected a permanent rejection, got {other:?}"),
    }
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.requests, 1);
    assert_eq!(ledger.total_deliveries(), 0);
}

#[tokio::test]
async fn clearing_the_ledger_forgets_deliveries_and_idempotency_records() {
    let vendor = vendor(config(Profile::Idempotent)).await;
    let key = key();
    let first = accepted_ref(&vendor.adapter.send(&message(), &key).await);

    vendor.ledger.clear_ledger().await.unwrap();
    assert_eq!(vendor.ledger.ledger().await.unwrap(), Default::default());

    let again = accepted_ref(&vendor.adapter.send(&message(), &key).await);
    assert_ne!(again, first);
    assert_eq!(
        vendor
            .ledger
            .ledger()
            .await
            .unwrap()
            .deliveries_of(key.as_str()),
        1
    );
}

#[tokio::test]
async fn the_profile_route_shows_the_configuration_and_current_faults() {
    let vendor = vendor(SandboxConfig {
        visibility_lag: Duration::from_millis(250),
        ..config(Profile::Queryable)
    })
    .await;
    vendor
        .ledger
        .set_faults(&parse_faults("rate_limited:nth=3").unwrap())
        .await
        .unwrap();

    let profile: serde_json::Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("{}/profile", vendor.handle.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();

    assert_eq!(
        profile,
        serde_json::json!({
            "profile": "queryable",
            "idempotency_window_secs": 86400.0,
            "visibility_lag_ms": 250,
            "delay_ms": 30000,
            "faults": [{"fault": "rate_limited", "when": {"nth": 3}}],
        })
    );
}

#[tokio::test]
async fn a_stopped_sandbox_refuses_the_connection_so_nothing_was_sent() {
    let vendor = vendor(config(Profile::Idempotent)).await;
    let adapter = vendor.adapter.clone();
    vendor.handle.shutdown().await.unwrap();

    match adapter.send(&message(), &key()).await {
        SendResult::Rejected {
            permanent: false,
            evidence,
            ..
        } => assert_eq!(evidence.stage, "connect"),
        other => panic!("expected a connect rejection, got {other:?}"),
    }
}

#[tokio::test]
async fn a_repeated_key_with_another_body_proves_the_first_was_processed() {
    let vendor = vendor(config(Profile::Idempotent)).await;
    let key = key();
    accepted_ref(&vendor.adapter.send(&message(), &key).await);

    let mut other = message();
    other.text = Some("another text".to_owned());
    match vendor.adapter.send(&other, &key).await {
        SendResult::KeyReused { evidence } => {
            assert_eq!(evidence.status, Some(422));
            assert_eq!(
                evidence.vendor_code.as_deref(),
                Some("idempotency_key_reused")
            );
        }
        other => panic!("expected the key to be reported reused, got {other:?}"),
    }
    let ledger = vendor.ledger.ledger().await.unwrap();
    assert_eq!(ledger.deliveries_of(key.as_str()), 1);
}

#[tokio::test]
async fn a_sandbox_that_offers_another_profile_than_declared_settles_nothing() {
    install_crypto_provider();
    let handle = herald_sandbox::spawn(config(Profile::Plain)).await.unwrap();
    let declared = SandboxRoute {
        base_url: handle.base_url(),
        from: None,
        profile: Profile::Idempotent,
        idempotency_window: SandboxConfig::default().idempotency_window,
        visibility_lag: Duration::ZERO,
        timeout: Duration::from_secs(5),
        callback_secret: None,
    };
    let adapter = SandboxAdapter::new(declared.clone());
    let mismatch = adapter.verify().await.unwrap_err();
    assert!(mismatch.contains("profile=plain"), "{mismatch}");

    // Its acceptances prove nothing either: a replay to it may have delivered again.
    let key = key();
    for _ in 0..2 {
        match adapter.send(&message(), &key).await {
            SendResult::Ambiguous { evidence } => {
                assert!(evidence.detail.contains("route declares"), "{evidence:?}")
            }
            other => panic!("expected an ambiguity, got {other:?}"),
        }
    }
    let ledger = handle.client().unwrap().ledger().await.unwrap();
    assert_eq!(ledger.deliveries_of(key.as_str()), 2);

    let honest = SandboxAdapter::new(SandboxRoute {
        profile: Profile::Plain,
        idempotency_window: SandboxConfig::default().idempotency_window,
        ..declared
    });
    assert_eq!(honest.verify().await, Ok(()));
}

#[tokio::test]
async fn a_failed_or_slow_look_up_proves_nothing() {
    let vendor = vendor_with_timeout(
        SandboxConfig {
            faults: parse_faults("lookup_error:nth=1,lookup_delay:nth=2").unwrap(),
            delay: Duration::from_secs(60),
            ..config(Profile::Queryable)
        },
        Duration::from_millis(300),
    )
    .await;
    let key = key();
    accepted_ref(&vendor.adapter.send(&message(), &key).await);
    for fault in ["lookup_error", "lookup_delay"] {
        let lookup = vendor.adapter.query(&message(), &key).await;
        assert!(
            matches!(lookup, QueryResult::Unsupported { .. }),
            "{fault}: {lookup:?}"
        );
    }
    let lookup = vendor.adapter.query(&message(), &key).await;
    assert!(matches!(lookup, QueryResult::Accepted { .. }), "{lookup:?}");
}
