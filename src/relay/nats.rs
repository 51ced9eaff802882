//! The NATS JetStream sink: each event is one message on `<subject_prefix>.notification.<state>`
//! with `Nats-Msg-Id` = the event id, and counts as published only once the stream has
//! acknowledged it. A republished event (a relay that crashed between publish and mark) keeps
//! its id, so JetStream drops it inside the stream's duplicate window (2 minutes by default).
//!
//! The connection is made in the background and re-made after every loss, so herald starts and
//! serves while NATS is down; the backlog waits in the outbox. The stream is created as soon as
//! NATS answers, before any event, if it does not exist (subjects `<subject_prefix>.>`), so that
//! a consumer started before herald's first event finds it; an existing one is used as it is.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage};
use async_trait::async_trait;

use super::policy::Failure;
use super::{Outgoing, Sink};
use crate::domain::cloudevent::STRUCTURED_JSON;

pub struct NatsSink {
    jetstream: jetstream::Context,
    stream: String,
    subject_prefix: String,
    /// Set once the stream is known to exist; cleared when a publish finds no stream, so that
    /// a stream deleted under a running herald is created again.
    stream_ready: AtomicBool,
}

impl NatsSink {
    pub async fn new(
        url: &str,
        stream: &str,
        subject_prefix: &str,
        credentials: Option<&Path>,
        timeout: Duration,
    ) -> anyhow::Result<NatsSink> {
        let client = crate::nats::connect(url, credentials, "herald relay", timeout).await?;
        let mut jetstream = jetstream::new(client);
        jetstream.set_timeout(timeout);
        Ok(NatsSink {
            jetstream,
            stream: stream.to_owned(),
            subject_prefix: subject_prefix.to_owned(),
            stream_ready: AtomicBool::new(false),
        })
    }
}

#[async_trait]
impl Sink for NatsSink {
    async fn prepare(&self) -> Result<(), Failure> {
        if self.stream_ready.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.jetstream
            .get_or_create_stream(jetstream::stream::Config {
                name: self.stream.clone(),
                subjects: vec![format!("{}.>", self.subject_prefix)],
                ..Default::default()
            })
            .await
            .map_err(|err| {
                Failure::Transient(format!(
                    "cannot find or create stream {}: {err}",
                    self.stream
                ))
            })?;
        self.stream_ready.store(true, Ordering::Relaxed);
        Ok(())
    }

    async fn publish(&self, events: &[Outgoing]) -> Vec<Result<(), Failure>> {
        // Every message goes out before any acknowledgement is awaited: one round trip for
        // the batch, not one per event.
        let mut pending = Vec::with_capacity(events.len());
        for event in events {
            let subject = format!("{}.{}", self.subject_prefix, event.kind);
            let message = PublishMessage::build()
                .payload(event.body.clone())
                .message_id(event.id.to_string())
                .header("Content-Type", STRUCTURED_JSON);
            pending.push(self.jetstream.send_publish(subject, message).await);
        }
        let mut outcomes = Vec::with_capacity(events.len());
        for sent in pending {
            let outcome = match sent {
                Ok(ack) => ack.await.map(drop).map_err(|err| {
                    if err.kind() == PublishErrorKind::StreamNotFound {
                        self.stream_ready.store(false, Ordering::Relaxed);
                    }
                    Failure::Transient(format!("no acknowledgement from the stream: {err}"))
                }),
                Err(err) => Err(Failure::Transient(format!("cannot publish: {err}"))),
            };
            outcomes.push(outcome);
        }
        outcomes
    }
}
