//! The inbox's NATS JetStream consumer (`[inbox.nats]`): a durable pull consumer on the
//! configured subjects of a stream (created if missing), so that herald resumes where it
//! stopped after a restart.
//!
//! Each message is acknowledged only after the transaction that recorded it committed; a crash
//! before the ack redelivers it, and the inbox answers the redelivery as a duplicate. An event
//! that can never become notifications (a missing attribute, an unmapped type, data its mapping
//! cannot render) is terminated (`+TERM`: never redelivered), counted in
//! `herald_inbox_rejected_total{reason}` and logged with the reason. A database failure
//! negatively acknowledges it with a delay, so JetStream delivers it again later.
//!
//! Messages may be in structured mode (the payload is the event in JSON) or binary mode
//! (`ce-` headers, the payload is the data), per the CloudEvents NATS binding.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use async_nats::jetstream::{self, AckKind, consumer::pull};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use super::{Inbox, Received, Refusal, Rejected};
use crate::config::InboxNatsConfig;
use crate::domain::CloudEvent;
use crate::domain::cloudevent::HEADER_PREFIX;

/// How long JetStream waits for an ack before it delivers a message again.
const ACK_WAIT: Duration = Duration::from_secs(30);
/// How soon a message the database could not take comes back.
const RETRY_DELAY: Duration = Duration::from_secs(5);
/// How long the consumer waits before it sets itself up again after losing its stream.
const RESTART_PAUSE: Duration = Duration::from_secs(1);

pub struct NatsInbox {
    inbox: Arc<Inbox>,
    tenant: String,
    url: String,
    stream: String,
    subjects: Vec<String>,
    durable: String,
    credentials: Option<PathBuf>,
}

impl NatsInbox {
    pub fn new(inbox: Arc<Inbox>, config: &InboxNatsConfig, tenant: String) -> NatsInbox {
        NatsInbox {
            inbox,
            tenant,
            url: config.url.clone(),
            stream: config.stream.clone(),
            subjects: config.subjects.clone(),
            durable: config.durable.clone(),
            credentials: config.credentials.clone(),
        }
    }

    /// Consumes until `shutdown`, setting itself up again whenever NATS goes away. The message
    /// being handled when `shutdown` fires is finished and acknowledged first.
    pub async fn run(self, shutdown: CancellationToken) {
        let client = match crate::nats::connect(
            &self.url,
            self.credentials.as_deref(),
            "herald inbox",
            Duration::from_secs(5),
        )
        .await
        {
            Ok(client) => client,
            Err(err) => {
                tracing::error!(err = format!("{err:#}"), "the NATS inbox cannot start");
                return;
            }
        };
        let jetstream = jetstream::new(client);
        while !shutdown.is_cancelled() {
            if let Err(err) = self.consume(&jetstream, &shutdown).await {
                tracing::warn!(err = format!("{err:#}"), stream = %self.stream, "the NATS inbox stopped; setting it up again");
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = tokio::time::sleep(RESTART_PAUSE) => {}
                }
            }
        }
    }

    async fn consume(
        &self,
        jetstream: &jetstream::Context,
        shutdown: &CancellationToken,
    ) -> anyhow::Result<()> {
        let stream = jetstream
            .get_or_create_stream(jetstream::stream::Config {
                name: self.stream.clone(),
                subjects: self.subjects.clone(),
                ..Default::default()
            })
            .await
            .with_context(|| format!("cannot find or create stream {}", self.stream))?;
        let mut config = pull::Config {
            durable_name: Some(self.durable.clone()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            ..Default::default()
        };
        // One subject works with any JetStream server; several need nats-server 2.10.
        match self.subjects.as_slice() {
            [one] => config.filter_subject = one.clone(),
            many => config.filter_subjects = many.to_vec(),
        }
        let consumer: pull::Stream = stream
            .get_or_create_consumer(&self.durable, config)
            .await
            .with_context(|| format!("cannot set up the durable consumer {}", self.durable))?
            .messages()
            .await
            .context("cannot pull messages")?;
        tracing::info!(stream = %self.stream, durable = %self.durable, "the NATS inbox is consuming");
        let mut messages = consumer;
        loop {
            let message = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                message = messages.next() => message,
            };
            match message {
                Some(Ok(message)) => self.handle(message).await,
                Some(Err(err)) => return Err(err).context("the pull subscription failed"),
                None => anyhow::bail!("the pull subscription ended"),
            }
        }
    }

    #[tracing::instrument(skip_all, fields(subject = %message.subject))]
    async fn handle(&self, message: jetstream::Message) {
        let received = match parse(&message) {
            Ok(event) => self
                .inbox
                .receive(&self.tenant, None, &event)
                .await
                .map_err(|refusal| (Some(event), refusal)),
            Err(rejected) => Err((None, Refusal::Invalid(rejected))),
        };
        let (ack, outcome) = match received {
            Ok(Received::Created(ids)) => (
                AckKind::Ack,
                format!("created {} notification(s)", ids.len()),
            ),
            Ok(Received::Duplicate(_)) => (AckKind::Ack, "a duplicate: nothing created".to_owned()),
            Err((event, Refusal::Invalid(rejected))) => {
                metrics::counter!("herald_inbox_rejected_total", "reason" => rejected.reason)
                    .increment(1);
                tracing::warn!(
                    source = event.as_ref().map(|e| e.source.as_str()),
                    id = event.as_ref().map(|e| e.id.as_str()),
                    reason = rejected.reason,
                    field = %rejected.field,
                    detail = %rejected.message,
                    "an upstream event was refused and terminated"
                );
                (AckKind::Term, "refused".to_owned())
            }
            Err((_, Refusal::Store(err))) => {
                tracing::warn!(%err, "the database cannot take an upstream event now; it comes back later");
                (AckKind::Nak(Some(RETRY_DELAY)), "not taken yet".to_owned())
            }
        };
        tracing::debug!(%outcome, "upstream event handled");
        if let Err(err) = message.ack_with(ack).await {
            // Unacknowledged, it is delivered again after ACK_WAIT, and the inbox dedups it.
            tracing::warn!(%err, "cannot acknowledge an upstream event");
        }
    }
}

/// The event in a message: binary mode when it has a `ce-specversion` header, else structured.
fn parse(message: &jetstream::Message) -> Result<CloudEvent, Rejected> {
    let headers: Vec<(&str, &str)> = message
        .headers
        .iter()
        .flat_map(|headers| headers.iter())
        .flat_map(|(name, values)| values.iter().map(move |v| (name.as_ref(), v.as_str())))
        .collect();
    let header = |wanted: &str| {
        headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(wanted))
            .map(|(_, value)| *value)
    };
    let binary = header(&format!("{HEADER_PREFIX}specversion")).is_some();
    let event = if binary {
        CloudEvent::from_binary(
            headers.iter().copied(),
            header("content-type"),
            &message.payload,
        )
    } else {
        CloudEvent::from_structured(&message.payload)
    };
    event.map_err(Rejected::attribute)
}
