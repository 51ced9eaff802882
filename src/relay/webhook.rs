//! The webhook sink: one Standard Webhooks POST per event to a fixed URL, through the webhook
//! adapter of `providers/webhook` — the same signing (`webhook-id` = the event id, so a
//! receiver dedups a republished event), the same SSRF guard, no redirects, no proxy. The body
//! is the event in CloudEvents structured mode (`application/cloudevents+json`).
//!
//! The adapter's classification decides what follows: 2xx is published; a refusal that no
//! retry cures (4xx, a refused destination) is a [`Failure::Refused`], which waits the longest
//! pause; anything that may pass (5xx, timeouts, a lost connection) is retried with backoff.

use std::time::Duration;

use async_trait::async_trait;
use herald_provider::{Adapter, Channel, Message, ProviderKey, SendResult};
use herald_webhook::{WebhookAdapter, WebhookRoute};
use secrecy::SecretString;

use super::policy::Failure;
use super::{Outgoing, Sink};
use crate::domain::cloudevent::STRUCTURED_JSON;

pub struct WebhookSink {
    adapter: WebhookAdapter,
    url: String,
}

impl WebhookSink {
    /// Fails on a malformed secret, and on a URL the guard refuses outright (an IP literal on
    /// a private network): a name is checked again on every send, after it resolves.
    pub fn new(
        url: &str,
        secrets: Vec<SecretString>,
        allow_private_networks: bool,
        timeout: Duration,
    ) -> anyhow::Result<WebhookSink> {
        let adapter = WebhookAdapter::new(WebhookRoute {
            secrets,
            timeout,
            allow_private_networks,
            max_payload_bytes: None,
            user_agent: Some(concat!("herald-relay/", env!("CARGO_PKG_VERSION")).into()),
        })?
        .with_content_type(STRUCTURED_JSON);
        let sink = WebhookSink {
            adapter,
            url: url.to_owned(),
        };
        let probe = sink.message("probe", serde_json::json!({}), None);
        sink.adapter
            .prepare(&probe, &ProviderKey::new("probe"))
            .map_err(|evidence| anyhow::anyhow!("{}", evidence.detail))?;
        Ok(sink)
    }

    /// The event as the adapter's message; the trace its extension names goes in W3C Trace
    /// Context's `traceparent` header too, where HTTP tracing looks for it.
    fn message(
        &self,
        id: &str,
        payload: serde_json::Value,
        trace_parent: Option<String>,
    ) -> Message {
        Message {
            notification_id: id.to_owned(),
            channel: Channel::Webhook,
            to: self.url.clone(),
            subject: None,
            text: None,
            html: None,
            payload: Some(payload),
            blocks: None,
            email: Default::default(),
            expires_at: None,
            trace_parent,
        }
    }

    async fn post(&self, event: &Outgoing) -> Result<(), Failure> {
        let id = event.id.to_string();
        let trace_parent = event.trace_parent.as_ref().map(|t| t.as_str().to_owned());
        let message = self.message(&id, event.json.clone(), trace_parent);
        let key = ProviderKey::new(id);
        let request = self
            .adapter
            .prepare(&message, &key)
            .map_err(|evidence| Failure::Refused(evidence.detail))?;
        match self.adapter.send_prepared(&request, &message, &key).await {
            SendResult::Accepted { .. } => Ok(()),
            SendResult::Rejected {
                permanent: true,
                evidence,
                ..
            } => Err(Failure::Refused(describe(&evidence))),
            SendResult::Rejected { evidence, .. }
            | SendResult::Ambiguous { evidence }
            | SendResult::KeyReused { evidence } => Err(Failure::Transient(describe(&evidence))),
        }
    }
}

fn describe(evidence: &herald_provider::Evidence) -> String {
    match evidence.status {
        Some(status) => format!("{} {status}: {}", evidence.stage, evidence.detail),
        None => format!("{}: {}", evidence.stage, evidence.detail),
    }
}

#[async_trait]
impl Sink for WebhookSink {
    async fn publish(&self, events: &[Outgoing]) -> Vec<Result<(), Failure>> {
        // Concurrently: the claim takes one event per notification, so order within a batch
        // does not matter.
        futures::future::join_all(events.iter().map(|event| self.post(event))).await
    }
}
