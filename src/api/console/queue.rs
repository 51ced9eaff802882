//! The front page: the review queue by reason and age, with the figures beside it.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use minijinja::context;
use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use super::session::SignedIn;
use super::{ACTIONS, reason_label};
use super::{QUEUE_PAGE, failure, page, rfc3339};
use crate::api::AppState;
use crate::api::review::{Filter, ReviewItem};
use crate::review::{Policy, Reason};
use crate::store::NotificationDetail;

/// A metric's value from `/metrics`' own text (summed over its series), for the front page;
/// 0 where it has no series.
fn metric(text: &str, name: &str) -> f64 {
    // A fold from +0.0, not `sum()`: the sum of no floats is -0.0, which prints as "-0.0".
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .fold(0.0, |sum, value| sum + value)
}

#[derive(Deserialize)]
pub(super) struct QueueQuery {
    pub(super) reason: Option<String>,
    pub(super) route: Option<String>,
    pub(super) since: Option<String>,
    pub(super) until: Option<String>,
    pub(super) done: Option<String>,
}

/// An age counter's span: from `since` (inclusive) until `until` (exclusive), open where absent.
type Bucket = (Option<OffsetDateTime>, Option<OffsetDateTime>);

/// The links of the front page's age counters: each lists exactly the items it counts
/// (`since` inclusive, `until` exclusive, on the time an item ended in review, which is its
/// `updated_at` while it waits).
fn age_buckets(now: OffsetDateTime) -> [Bucket; 3] {
    let hour = now - time::Duration::hours(1);
    let day = now - time::Duration::days(1);
    [
        (Some(hour), None),
        (Some(day), Some(hour)),
        (None, Some(day)),
    ]
}

pub(super) async fn queue(
    State(state): State<AppState>,
    SignedIn { session, .. }: SignedIn,
    Query(query): Query<QueueQuery>,
) -> Response {
    let tenant = &session.principal.tenant;
    let now = OffsetDateTime::now_utc();
    let given = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    let filter = Filter {
        route: given(&query.route),
        reason: given(&query.reason),
        since: given(&query.since),
        until: given(&query.until),
    };
    let filter = match filter.parse(QUEUE_PAGE, None, state.review) {
        Ok(f) => f,
        Err(e) => {
            return failure(
                StatusCode::BAD_REQUEST,
                format!("{}: {}", e.field, e.message),
            );
        }
    };
    let all = crate::store::ReviewFilter {
        reasons: Reason::ALL.to_vec(),
        limit: 10_000,
        ..Default::default()
    };
    let (items, everything) = match tokio::try_join!(
        state.store.review(tenant, &filter),
        state.store.review(tenant, &all),
    ) {
        Ok(both) => both,
        Err(err) => return failure(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
    };
    let rows = rows(items, state.review, now);
    let buckets = age_buckets(now);
    let counters = Counters::of(&everything, state.review, &buckets);
    let text = state.metrics.render();
    let queue_age = match state.store.queue_stats(now).await {
        Ok(stats) => stats
            .oldest_due
            .map(|d| crate::review::age_in_words(now - d))
            .unwrap_or_else(|| "none due".to_owned()),
        Err(_) => "?".to_owned(),
    };
    let next = rows
        .iter()
        .find(|row| Some(row["id"].as_str().unwrap_or_default()) != query.done.as_deref())
        .map(|row| row["id"].clone());
    page(
        "queue.html",
        context! {
            title => "Review queue",
            csrf => session.csrf,
            principal => session.principal.name,
            items => rows,
            actions => ACTIONS,
            reasons => counters.reasons(state.review),
            choices => Reason::ALL.iter().map(|r| (r.as_str(), reason_label(*r))).collect::<Vec<_>>(),
            routes => counters.routes(),
            ages => counters.ages(buckets),
            hit_rate => hit_rate(&text),
            queue_age => queue_age,
            // A count of events: a whole number, whatever the exposition's float says.
            outbox_backlog => metric(&text, "herald_outbox_backlog").round() as i64,
            reason => query.reason,
            route => query.route,
            done => query.done,
            next => next,
        },
    )
}

/// The listed items as the page's rows.
fn rows(items: Vec<NotificationDetail>, review: Policy, now: OffsetDateTime) -> Vec<Value> {
    items
        .into_iter()
        .filter_map(|detail| ReviewItem::of(detail, review))
        .map(|item| {
            let n = &item.notification.notification;
            serde_json::json!({
                "id": n.id.to_string(),
                "reason": item.reason,
                "label": reason_label(item.reason),
                "route": n.route,
                "to": n.to,
                "why": item.why,
                "age": crate::review::age_in_words(now - n.updated_at),
            })
        })
        .collect()
}

/// The front page's counters, each the size of the list its link shows: by reason
/// (`?reason=`), and over what waits for a person (the default view) by route (`?route=`) and
/// by age.
struct Counters {
    by_reason: HashMap<Reason, u64>,
    by_route: HashMap<String, u64>,
    by_age: [u64; 3],
}

impl Counters {
    fn of(everything: &[NotificationDetail], review: Policy, buckets: &[Bucket; 3]) -> Self {
        let mut counters = Counters {
            by_reason: HashMap::new(),
            by_route: HashMap::new(),
            by_age: [0; 3],
        };
        for detail in everything {
            let n = &detail.notification;
            let Some(reason) = crate::review::reason(n, &detail.attempts) else {
                continue;
            };
            *counters.by_reason.entry(reason).or_default() += 1;
            if !review.waits(reason) {
                continue;
            }
            *counters.by_route.entry(n.route.clone()).or_default() += 1;
            if let Some(slot) = buckets.iter().position(|(since, until)| {
                since.is_none_or(|s| n.updated_at >= s) && until.is_none_or(|u| n.updated_at < u)
            }) {
                counters.by_age[slot] += 1;
            }
        }
        counters
    }

    fn reasons(&self, review: Policy) -> Vec<Value> {
        Reason::ALL
            .iter()
            .map(|r| {
                serde_json::json!({
                    "reason": r.as_str(),
                    "label": reason_label(*r),
                    "count": self.by_reason.get(r).copied().unwrap_or(0),
                    "waits": review.waits(*r),
                })
            })
            .collect()
    }

    fn routes(&self) -> Vec<(String, u64)> {
        let mut by_route: Vec<(String, u64)> =
            self.by_route.iter().map(|(r, n)| (r.clone(), *n)).collect();
        by_route.sort();
        by_route
    }

    fn ages(&self, buckets: [Bucket; 3]) -> Vec<Value> {
        ["under an hour", "under a day", "older"]
            .iter()
            .zip(buckets)
            .zip(self.by_age)
            .map(|((label, (since, until)), count)| {
                let mut link = Vec::new();
                if let Some(since) = since {
                    link.push(format!("since={}", rfc3339(since)));
                }
                if let Some(until) = until {
                    link.push(format!("until={}", rfc3339(until)));
                }
                serde_json::json!({"label": label, "count": count, "query": link.join("&")})
            })
            .collect()
    }
}

/// How often an enqueue was a replay of an earlier one, from this process's counters.
fn hit_rate(metrics: &str) -> String {
    let accepted = metric(metrics, "herald_notifications_accepted_total");
    let replays = metric(metrics, "herald_idempotency_replays_total");
    if accepted + replays > 0.0 {
        format!(
            "{:.1} % ({replays} of {})",
            100.0 * replays / (accepted + replays),
            accepted + replays
        )
    } else {
        "no requests yet".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_is_summed_over_its_series_and_not_confused_with_a_longer_name() {
        let text = "# TYPE x counter\nherald_outbox_backlog{sink=\"a\"} 3\nherald_outbox_backlog{sink=\"b\"} 4\nherald_outbox_backlog_total 100\n";
        assert_eq!(metric(text, "herald_outbox_backlog"), 7.0);
        assert_eq!(metric(text, "herald_missing"), 0.0);
    }
}
