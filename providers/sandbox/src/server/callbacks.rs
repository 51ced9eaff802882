//! The sandbox's delivery reports: after each new delivery it posts signed callbacks to the
//! URL it was given, late, repeated and out of order when told to, as real vendors do.
//!
//! Each report is retried on a connection failure or a 5xx answer (herald may be restarting),
//! with a growing pause, for about half a minute; a 4xx answer is final, as it is for vendors.

use std::time::Duration;

use herald_provider::signature::SigningSecret;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::wire::{CallbackBody, reports_for};

/// Where and how the sandbox reports deliveries; replaceable at runtime (`PUT /callbacks`),
/// because herald's address may be known only after the sandbox started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallbackTarget {
    /// herald's callback URL for the route, e.g. `http://127.0.0.1:8080/v1/callbacks/sandbox`.
    pub url: String,
    /// How long after a delivery its reports start, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// How many extra times each report is posted.
    #[serde(default)]
    pub duplicates: u32,
    /// Posts a delivery's reports last first.
    #[serde(default)]
    pub reorder: bool,
}

/// How many times one report is tried before the sandbox gives up on it.
const TRIES: u32 = 8;

/// Posts the reports of one delivery in the background.
pub(super) fn report(
    secret: SigningSecret,
    target: CallbackTarget,
    http: reqwest::Client,
    message_id: String,
    reference: String,
    to: String,
) {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(target.delay_ms)).await;
        let mut reports: Vec<(String, Vec<u8>)> = reports_for(&to)
            .iter()
            .map(|status| {
                let body = CallbackBody {
                    reference: reference.clone(),
                    message_id: message_id.clone(),
                    to: to.clone(),
                    status: (*status).to_owned(),
                    at: OffsetDateTime::now_utc()
                        .format(&Rfc3339)
                        .unwrap_or_default(),
                };
                let id = format!("evt_{}", uuid::Uuid::now_v7().simple());
                (id, serde_json::to_vec(&body).unwrap_or_default())
            })
            .collect();
        if target.reorder {
            reports.reverse();
        }
        for (id, body) in &reports {
            for _ in 0..=target.duplicates {
                post(&secret, &target.url, &http, id, body).await;
            }
        }
    });
}

async fn post(secret: &SigningSecret, url: &str, http: &reqwest::Client, id: &str, body: &[u8]) {
    let mut pause = Duration::from_millis(100);
    for _ in 0..TRIES {
        let timestamp = OffsetDateTime::now_utc().unix_timestamp();
        let signature = secret.sign(id, timestamp, body);
        let sent = http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(body.to_vec())
            .send()
            .await;
        match sent {
            Ok(answer) if !answer.status().is_server_error() => {
                if !answer.status().is_success() {
                    tracing::warn!(%id, status = %answer.status(), "a delivery report was refused");
                }
                return;
            }
            Ok(answer) => {
                tracing::debug!(%id, status = %answer.status(), "report failed; retrying")
            }
            Err(err) => tracing::debug!(%id, error = %err, "report failed; retrying"),
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(5));
    }
    tracing::warn!(%id, "gave up on a delivery report");
}
