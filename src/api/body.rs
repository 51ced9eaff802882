//! Every request body arrives whole by a deadline, or is cut off with a `408`. An idle timer
//! between frames (tower-http's, used before) let a client that sent a byte a second hold a
//! request, and its connection slot, as long as it pleased; `max_connections` such clients
//! would leave even `/healthz` unanswered. The deadline is fixed when the head arrives:
//! `server.body_timeout_seconds`, plus the time the declared length takes at
//! [`MIN_BODY_RATE`]. It holds for HTTP/1.1 and every HTTP/2 stream alike.

use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONTENT_LENGTH;
use bytes::Bytes;
use http_body::{Frame, SizeHint};

use tokio::time::Sleep;

/// The slowest a body may arrive, on top of the timeout: 64 KiB a second, so that a large
/// attachment over a slow link gets through and a drip does not.
pub const MIN_BODY_RATE: u64 = 64 * 1024;

/// The error a body's reader sees once its deadline passes.
#[derive(Debug)]
pub struct BodyDeadline;

impl fmt::Display for BodyDeadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the request body did not arrive whole in time")
    }
}

impl Error for BodyDeadline {}

/// `request` with its body bound to arrive by its deadline (see the module's doc).
pub fn deadlined(request: Request, timeout: Duration) -> Request {
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    request.map(|inner| {
        Body::new(Deadlined {
            inner,
            deadline: Box::pin(tokio::time::sleep(allowed(timeout, declared))),
        })
    })
}

/// How long a body of `declared` bytes has to arrive.
fn allowed(timeout: Duration, declared: u64) -> Duration {
    timeout + Duration::from_secs(declared / MIN_BODY_RATE)
}

/// Whether `error` (or what caused it) is a body's passed deadline.
pub fn is_deadline(error: &(dyn Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<BodyDeadline>() {
            return true;
        }
        cause = error.source();
    }
    false
}

struct Deadlined {
    inner: Body,
    deadline: Pin<Box<Sleep>>,
}

impl http_body::Body for Deadlined {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.deadline.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Some(Err(BodyDeadline.into())));
        }
        Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map_err(axum::BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_body_that_drips_is_cut_off_at_its_deadline_and_says_why() {
        let drip = futures::stream::unfold(0, |sent| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            (sent < 100).then(|| (Ok::<_, std::io::Error>(Bytes::from_static(b"x")), sent + 1))
        });
        let request = Request::builder()
            .header(CONTENT_LENGTH, "100")
            .body(Body::from_stream(drip))
            .unwrap();
        let started = std::time::Instant::now();
        let read = axum::body::to_bytes(
            deadlined(request, Duration::from_millis(100)).into_body(),
            1000,
        )
        .await;
        let error = read.expect_err("cut off");
        assert!(is_deadline(&error), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "at its deadline, not at its end"
        );
    }

    #[tokio::test]
    async fn a_body_that_arrives_in_time_is_read_whole() {
        let request = Request::builder()
            .header(CONTENT_LENGTH, "5")
            .body(Body::from("hello"))
            .unwrap();
        let read =
            axum::body::to_bytes(deadlined(request, Duration::from_secs(1)).into_body(), 1000)
                .await;
        assert_eq!(read.unwrap(), "hello");
    }

    #[test]
    fn a_large_body_is_given_time_at_the_least_rate() {
        let timeout = Duration::from_secs(30);
        assert_eq!(allowed(timeout, 500), timeout);
        assert_eq!(
            allowed(timeout, 14 * 1024 * 1024),
            Duration::from_secs(30 + 224)
        );
    }
}
