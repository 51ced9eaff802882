//! The log sink: each event as one line of JSON (structured mode), on stdout or appended to a
//! file. herald's own logs go to stderr, so stdout carries events only. A write that fails
//! (a full disk) is retried like any transient failure.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use async_trait::async_trait;

use super::policy::Failure;
use super::{Outgoing, Sink};

pub struct LogSink {
    /// `None`: stdout. The lock keeps one batch's lines together.
    file: Option<(PathBuf, Mutex<std::fs::File>)>,
}

impl LogSink {
    pub fn stdout() -> LogSink {
        LogSink { file: None }
    }

    pub fn file(path: &Path) -> anyhow::Result<LogSink> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {} for events: {e}", path.display()))?;
        Ok(LogSink {
            file: Some((path.to_owned(), Mutex::new(file))),
        })
    }
}

#[async_trait]
impl Sink for LogSink {
    async fn publish(&self, events: &[Outgoing]) -> Vec<Result<(), Failure>> {
        let mut lines = Vec::new();
        for event in events {
            lines.extend_from_slice(&event.body);
            lines.push(b'\n');
        }
        let written = match &self.file {
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(&lines).and_then(|()| out.flush())
            }
            Some((path, file)) => {
                let mut file = file.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                file.write_all(&lines)
                    .and_then(|()| file.flush())
                    .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
            }
        };
        let outcome = written.map_err(|e| Failure::Transient(format!("cannot write: {e}")));
        vec![outcome; events.len()]
    }
}
