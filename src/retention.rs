//! Retention: what herald no longer needs is deleted a batch per transaction, so that a large
//! clean-up never holds long locks and the tables that every enqueue and claim read stay the
//! size of the recent past. Idempotency keys and upstream events' ids are forgotten after
//! `retention.idempotency_seconds`; finished notifications are deleted after
//! `retention.finished_seconds` when it is set: delivered, cancelled, failed ones a person
//! closed, and permanent refusals unless `[review] permanent_refusals = "review"` keeps them for
//! a person. Nothing that waits for a person is deleted. Published outbox events have their own
//! retention in the relay.

use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::review::PermanentRefusals;
use crate::store::{Retention, StoreResult};

/// How often retention looks again once it has caught up.
const INTERVAL: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub idempotency: Duration,
    /// `None`: finished notifications are kept.
    pub finished: Option<Duration>,
    pub batch_size: u32,
    /// Whether a permanent refusal is finished (deleted when due) or waits for a person.
    pub refusals: PermanentRefusals,
}

impl From<&Config> for Settings {
    fn from(config: &Config) -> Self {
        let retention = &config.retention;
        Settings {
            idempotency: Duration::from_secs(retention.idempotency_seconds),
            finished: (retention.finished_seconds > 0)
                .then(|| Duration::from_secs(retention.finished_seconds)),
            batch_size: retention.batch_size,
            refusals: config.review.permanent_refusals,
        }
    }
}

/// What one sweep deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Idempotency keys and upstream events' inbox records.
    pub keys: u64,
    pub notifications: u64,
    /// Attachment contents no notification names any more.
    pub files: u64,
}

/// Deletes everything past its retention at `now`, a batch per transaction, until a batch
/// comes back short or `shutdown` fires.
pub async fn sweep(
    store: &dyn Retention,
    settings: &Settings,
    now: OffsetDateTime,
    shutdown: &CancellationToken,
) -> StoreResult<Swept> {
    let mut swept = Swept::default();
    let full = u64::from(settings.batch_size);
    loop {
        let keys = store
            .forget_keys(now - settings.idempotency, settings.batch_size)
            .await?;
        let (notifications, files) = match settings.finished {
            Some(finished) => {
                let notifications = store
                    .forget_finished(now - finished, settings.batch_size, settings.refusals)
                    .await?;
                // A file goes with the last notification that names it: one enqueued after
                // the horizon is not past it, and neither is the file.
                let files = store
                    .forget_files(now - finished, settings.batch_size)
                    .await?;
                (notifications, files)
            }
            None => (0, 0),
        };
        metrics::counter!("herald_retention_deleted_total", "kind" => "idempotency_records")
            .increment(keys);
        metrics::counter!("herald_retention_deleted_total", "kind" => "notifications")
            .increment(notifications);
        metrics::counter!("herald_retention_deleted_total", "kind" => "attachments")
            .increment(files);
        swept.keys += keys;
        swept.notifications += notifications;
        swept.files += files;
        // Short on every count: nothing more waits. (The keys' count spans two tables, so it
        // may ask for one round more than needed.)
        if (keys < full && notifications < full && files < full) || shutdown.is_cancelled() {
            return Ok(swept);
        }
        // Let other writers in between batches.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sweeps every [`INTERVAL`] until `shutdown`.
pub async fn run(store: Arc<dyn Retention>, settings: Settings, shutdown: CancellationToken) {
    loop {
        match sweep(&*store, &settings, OffsetDateTime::now_utc(), &shutdown).await {
            Ok(swept) if swept != Swept::default() => {
                tracing::debug!(
                    keys = swept.keys,
                    notifications = swept.notifications,
                    files = swept.files,
                    "deleted what is past its retention"
                );
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(%err, "retention cannot delete what is past it"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(INTERVAL) => {}
        }
    }
}
