//! The byte stream beneath the SMTP session, watched for the two moments that classify a failure.
//!
//! lettre reports a write error and a read error alike (`network error`) and records no stage
//! (its `Error` has no stage), yet the two sides of the final dot mean opposite things: before the dot has
//! left, the server cannot have taken the message; after it, it may have (RFC 1047). So the
//! adapter hands lettre this stream instead of a bare socket and marks when the message content
//! starts; lettre's `message()` writes and flushes the whole content, final `.` included, and
//! only then reads the reply. The first read after the mark therefore proves the dot was handed
//! to the kernel, and no read proves it was not.
//!
//! Below TLS (plain and STARTTLS sessions) this still holds: tokio-rustls reads from the socket
//! only when its reader is polled, never while writing or flushing application data.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::task::{Context, Poll};

use lettre::transport::smtp::client::AsyncTokioStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

// Phase 0, the default: the content has not started.
/// The content is being written; the final dot has not been flushed yet.
const SENDING_CONTENT: u8 = 1;
/// The content and the final dot were flushed; the client is waiting for the reply.
const AWAITING_REPLY: u8 = 2;

/// What the adapter learns from the stream; shared between the stream (inside lettre) and the
/// adapter, which reads it after an error or a timeout.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watch(Arc<WatchState>);

#[derive(Debug, Default)]
struct WatchState {
    /// The client has written at least one byte: a failure now is past the greeting.
    wrote: AtomicBool,
    /// One of the phases above; the adapter moves it to `SENDING_CONTENT`, the stream to
    /// `AWAITING_REPLY`.
    phase: AtomicU8,
}

impl Watch {
    /// Called by the adapter right before it hands lettre the message content.
    pub(crate) fn content_starts(&self) {
        self.0.phase.store(SENDING_CONTENT, Ordering::SeqCst);
    }

    /// The whole content, final dot included, was flushed to the socket.
    pub(crate) fn dot_sent(&self) -> bool {
        self.0.phase.load(Ordering::SeqCst) == AWAITING_REPLY
    }

    /// The client has sent something (its EHLO, at the earliest).
    pub(crate) fn wrote(&self) -> bool {
        self.0.wrote.load(Ordering::SeqCst)
    }
}

/// A stream that reports to a [`Watch`]; everything else passes through untouched.
pub(crate) struct Watched<S> {
    inner: S,
    watch: Watch,
    peer: SocketAddr,
}

impl<S> Watched<S> {
    pub(crate) fn new(inner: S, watch: Watch, peer: SocketAddr) -> Self {
        Watched { inner, watch, peer }
    }
}

impl<S> fmt::Debug for Watched<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watched").field("peer", &self.peer).finish()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // lettre reads only after `message()` has flushed the final dot (see the module docs).
        let _ = self.watch.0.phase.compare_exchange(
            SENDING_CONTENT,
            AWAITING_REPLY,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.watch.0.wrote.store(true, Ordering::SeqCst);
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.watch.0.wrote.store(true, Ordering::SeqCst);
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

impl<S> AsyncTokioStream for Watched<S>
where
    S: AsyncRead + AsyncWrite + Send + Sync + Unpin,
{
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.peer)
    }
}
