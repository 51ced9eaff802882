//! The look-up's paging against the fake. Slack may list fewer messages a page than the adapter
//! asks for (200), and lists at most 15 to a non-Marketplace app: the fake, capped to a page of
//! one, two or fifteen, makes the adapter follow `next_cursor` through the window, to the message
//! or to the last page, and shows where that stops proving anything: past [`MAX_PAGES`], and at
//! a page Slack will not serve.

use herald_provider::{Adapter, Message, ProviderKey, QueryResult};
use herald_provider_testkit::support::{
    accepted_ref, assert_not_found_yet, found, unique_key, unsupported,
};
use herald_slack::fake::{CHANNEL, FakeConfig};
use herald_slack::{MAX_PAGES, SlackAdapter};

use crate::support::{Vendor, message, vendor};

/// A fake whose history lists at most `cap` messages a page.
fn capped(cap: usize) -> FakeConfig {
    FakeConfig {
        history_page_cap: cap,
        ..FakeConfig::default()
    }
}

/// `n` notifications posted one after the other to the fake's channel, oldest first: each
/// message, key and `provider_ref`. The history lists them newest first.
async fn posted(adapter: &SlackAdapter, n: usize) -> Vec<(Message, ProviderKey, String)> {
    let mut sent = Vec::new();
    for _ in 0..n {
        let (message, key) = (message(), unique_key());
        let id = accepted_ref(&adapter.send(&message, &key).await);
        sent.push((message, key, id));
    }
    sent
}

/// The look-up of `key`, and the history pages it asked for.
async fn query(vendor: &Vendor, message: &Message, key: &ProviderKey) -> (QueryResult, usize) {
    let before = vendor.fake.lookups().len();
    let result = vendor.adapter.query(message, key).await;
    (result, vendor.fake.lookups().len() - before)
}

/// The `ts` of a `provider_ref` (`<channel>/<ts>`).
fn ts(provider_ref: &str) -> &str {
    provider_ref.split_once('/').expect("channel/ts").1
}

#[tokio::test]
async fn a_message_on_a_later_page_is_found_by_following_the_cursor() {
    let vendor = vendor(capped(2)).await;
    // Newest first, two a page: [4, 3], [2, 1], [0].
    let sent = posted(&vendor.adapter, 5).await;

    for (nth, (message, key, id)) in sent.iter().enumerate() {
        let (lookup, pages) = query(&vendor, message, key).await;

        assert_eq!(&found(&lookup), std::slice::from_ref(id), "message {nth}");
        // Every page of the window is read, also after the message was found (a second send
        // under the key would be older, further on).
        assert_eq!(pages, 3, "message {nth}");
        // One message, however many pages were read.
        assert!(
            lookup.evidence().detail.starts_with("found message"),
            "{:?}",
            lookup.evidence()
        );
    }

    let asked = vendor.fake.lookups();
    let first = &asked[..3];
    assert!(!first[0].contains_key("cursor"), "{first:?}");
    // Each next page from where the last one ended (the fake's cursor names the last `ts` it
    // listed), the rest of the request the same: the window does not move while it is read.
    assert_eq!(first[1]["cursor"], format!("next_ts:{}", ts(&sent[3].2)));
    assert_eq!(first[2]["cursor"], format!("next_ts:{}", ts(&sent[1].2)));
    for args in first {
        assert_eq!(args["channel"], CHANNEL);
        assert_eq!(args["include_all_metadata"], "true");
        // The adapter still asks for 200; Slack lists fewer.
        assert_eq!(args["limit"], "200");
        assert_eq!(args["oldest"], first[0]["oldest"]);
    }
    assert_eq!(vendor.fake.ledger().total(), 5);
}

#[tokio::test]
async fn not_found_yet_only_once_the_last_page_is_read() {
    let vendor = vendor(capped(2)).await;
    posted(&vendor.adapter, 5).await;

    let (lookup, pages) = query(&vendor, &message(), &unique_key()).await;

    assert_not_found_yet(&lookup);
    assert_eq!(pages, 3);
    let detail = &lookup.evidence().detail;
    assert!(detail.contains("none of the 5 messages"), "{detail}");
}

#[tokio::test]
async fn a_window_of_max_pages_is_listed_whole() {
    let vendor = vendor(capped(1)).await;
    let sent = posted(&vendor.adapter, MAX_PAGES).await;

    // The oldest message, on the last page.
    let (message, key, id) = &sent[0];
    let (lookup, pages) = query(&vendor, message, key).await;
    assert_eq!(&found(&lookup), std::slice::from_ref(id));
    assert_eq!(pages, MAX_PAGES);

    let (lookup, pages) = query(&vendor, &self::message(), &unique_key()).await;
    assert_not_found_yet(&lookup);
    assert_eq!(pages, MAX_PAGES);
}

#[tokio::test]
async fn a_window_of_more_than_max_pages_is_not_listed_whole() {
    let vendor = vendor(capped(1)).await;
    let sent = posted(&vendor.adapter, MAX_PAGES + 1).await;

    // Not posted: absence is not proven, however long after the lag.
    let (lookup, pages) = query(&vendor, &message(), &unique_key()).await;
    let detail = &unsupported(&lookup).detail;
    assert!(detail.contains("not listed whole"), "{detail}");
    assert_eq!(pages, MAX_PAGES);

    // The oldest, on the page after the last one read: not found, and not "not found" either.
    let (message, key, _) = &sent[0];
    let (lookup, pages) = query(&vendor, message, key).await;
    unsupported(&lookup);
    assert_eq!(pages, MAX_PAGES);

    // The newest, on the first page: found, though the rest was not listed.
    let (message, key, id) = &sent[MAX_PAGES];
    let (lookup, _) = query(&vendor, message, key).await;
    assert_eq!(&found(&lookup), std::slice::from_ref(id));
}

/// Slack's limits for a commercially distributed app outside the Marketplace created since
/// 2025-05-29: 15 messages a page, one `conversations.history` request a minute.
fn non_marketplace() -> FakeConfig {
    FakeConfig {
        history_page_cap: 15,
        history_requests_per_minute: Some(1),
        ..FakeConfig::default()
    }
}

#[tokio::test]
async fn for_a_non_marketplace_app_a_look_up_past_the_first_page_proves_nothing() {
    let vendor = vendor(non_marketplace()).await;
    posted(&vendor.adapter, 16).await;

    let (lookup, pages) = query(&vendor, &message(), &unique_key()).await;

    // The second page is refused for the minute: `Unsupported`, never `NotFoundYet`.
    let evidence = unsupported(&lookup);
    assert_eq!(evidence.status, Some(429));
    assert_eq!(evidence.vendor_code.as_deref(), Some("ratelimited"));
    assert_eq!(pages, 2);
}

#[tokio::test]
async fn a_message_on_the_first_page_is_found_though_a_later_page_is_refused() {
    let vendor = vendor(non_marketplace()).await;
    let sent = posted(&vendor.adapter, 16).await;

    // The newest message, on the first page; the second page is rate-limited.
    let (message, key, id) = &sent[15];
    let (lookup, pages) = query(&vendor, message, key).await;

    assert_eq!(&found(&lookup), std::slice::from_ref(id));
    assert_eq!(pages, 2);
}
