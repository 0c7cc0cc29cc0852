//! Connection limits of the gRPC listeners (`[grpc] max_connections`, `idle_timeout_s`).
//!
//! [`limit`] wraps a listener's stream of accepted connections: beyond `max_connections`
//! connections open at once, a new one is closed at once (its file descriptor released) and
//! counted; a WARN says how many were refused, at most once per [`REFUSAL_LOG_INTERVAL`].
//! Every accepted connection is a [`Limited`] stream that holds its slot until it is dropped
//! and fails its reads once nothing arrived for `idle_timeout` (hyper then closes it), or for
//! [`FIRST_BYTES_TIMEOUT`] when nothing at all arrived yet (a client sends its preface at
//! once; a socket opened and left silent only holds a slot that long). HTTP/2
//! clients that are alive answer the server's keep-alive pings (sent every third of the idle
//! timeout, see `daemon.rs`), so a quiet subscriber keeps its connection; a socket opened and
//! left silent does not.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tokio_stream::{Stream, StreamExt};

/// Shortest interval between two WARN lines about refused connections.
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// How long a new connection may stay without sending a byte (when shorter than the idle
/// timeout).
pub const FIRST_BYTES_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
struct RefusalLog {
    unlogged: u64,
    last: Option<Instant>,
    flush_due: bool,
}

/// The shared budget of connections of every listener.
#[derive(Debug)]
pub struct ConnLimits {
    slots: Arc<Semaphore>,
    max: u32,
    idle_timeout: Duration,
    refused: AtomicU64,
    /// Refusals not yet logged, when the last WARN was written, whether a later WARN is due.
    log: Mutex<RefusalLog>,
}

impl ConnLimits {
    pub fn new(max_connections: u32, idle_timeout: Duration) -> Arc<ConnLimits> {
        Arc::new(ConnLimits {
            slots: Arc::new(Semaphore::new(max_connections as usize)),
            max: max_connections,
            idle_timeout,
            refused: AtomicU64::new(0),
            log: Mutex::new(RefusalLog::default()),
        })
    }

    /// Connections refused since start.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.max as usize - self.slots.available_permits()
    }

    /// Counts a refusal; logs at once when no WARN was written in the last
    /// [`REFUSAL_LOG_INTERVAL`], else once that interval is over (with the count).
    fn note_refusal(self: &Arc<Self>, listener: &str) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut log = self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        log.unlogged += 1;
        let now = Instant::now();
        match log.last {
            Some(t) if now.duration_since(t) < REFUSAL_LOG_INTERVAL => {
                if !log.flush_due {
                    log.flush_due = true;
                    let this = self.clone();
                    let listener = listener.to_string();
                    tokio::spawn(async move {
                        tokio::time::sleep_until(t + REFUSAL_LOG_INTERVAL).await;
                        let mut log = this.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                        this.warn(&mut log, &listener);
                    });
                }
            }
            _ => self.warn(&mut log, listener),
        }
    }

    fn warn(&self, log: &mut RefusalLog, listener: &str) {
        if log.unlogged > 0 {
            tracing::warn!(
                listener = %crate::logging::untrusted(listener),
                refused = log.unlogged,
                refused_total = self.refused(),
                max_connections = self.max,
                "gRPC connections refused: grpc.max_connections reached (silent ones are closed after 10 s, idle ones after grpc.idle_timeout_s)"
            );
        }
        *log = RefusalLog {
            unlogged: 0,
            last: Some(Instant::now()),
            flush_due: false,
        };
    }
}

/// The accepted connections of `incoming` within `limits` (see the module documentation).
pub fn limit<S, IO, E>(
    incoming: S,
    limits: Arc<ConnLimits>,
    listener: String,
) -> impl Stream<Item = Result<Limited<IO>, E>>
where
    S: Stream<Item = Result<IO, E>>,
{
    incoming.filter_map(move |r| match r {
        Err(e) => Some(Err(e)),
        Ok(io) => match limits.slots.clone().try_acquire_owned() {
            Ok(permit) => Some(Ok(Limited::new(io, permit, limits.idle_timeout))),
            Err(_) => {
                // Dropping the stream closes it.
                limits.note_refusal(&listener);
                None
            }
        },
    })
}

/// An accepted connection: holds its slot, and fails reads after the idle timeout.
pub struct Limited<IO> {
    io: IO,
    _slot: OwnedSemaphorePermit,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
}

impl<IO> Limited<IO> {
    fn new(io: IO, slot: OwnedSemaphorePermit, idle_timeout: Duration) -> Limited<IO> {
        Limited {
            io,
            _slot: slot,
            idle_timeout,
            idle: Box::pin(tokio::time::sleep(idle_timeout.min(FIRST_BYTES_TIMEOUT))),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Limited<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    let at = Instant::now() + this.idle_timeout;
                    this.idle.as_mut().reset(at);
                }
                Poll::Ready(r)
            }
            Poll::Pending => match this.idle.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "nothing received for {} s (grpc.idle_timeout_s)",
                        this.idle_timeout.as_secs()
                    ),
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// The write half and the connection info of a connection wrapper that only watches or
/// rewrites what the client sends: writes go to the wrapped `io` unchanged.
macro_rules! forward_write_half {
    ($wrapper:ident) => {
        impl<IO: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for $wrapper<IO> {
            fn poll_write(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
            }
            fn poll_flush(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.io).poll_flush(cx)
            }
            fn poll_shutdown(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
            }
            fn poll_write_vectored(
                mut self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
            }
            fn is_write_vectored(&self) -> bool {
                self.io.is_write_vectored()
            }
        }

        impl<IO: tonic::transport::server::Connected> tonic::transport::server::Connected for $wrapper<IO> {
            type ConnectInfo = IO::ConnectInfo;
            fn connect_info(&self) -> Self::ConnectInfo {
                self.io.connect_info()
            }
        }
    };
}
pub(crate) use forward_write_half;

forward_write_half!(Limited);

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn beyond_the_limit_connections_are_closed_and_silent_ones_time_out() {
        let limits = ConnLimits::new(2, Duration::from_millis(400));
        let mut peers = Vec::new();
        let mut served = Vec::new();
        for _ in 0..3 {
            let (a, b) = tokio::io::duplex(64);
            peers.push(a);
            served.push(Ok::<_, io::Error>(b));
        }
        let accepted: Vec<_> = limit(tokio_stream::iter(served), limits.clone(), "test".into())
            .collect()
            .await;
        assert_eq!(accepted.len(), 2);
        assert_eq!((limits.open(), limits.refused()), (2, 1));
        let mut accepted: Vec<_> = accepted.into_iter().map(|r| r.unwrap()).collect();
        // The refused one is closed.
        let mut buf = [0u8; 4];
        assert_eq!(peers[2].read(&mut buf).await.unwrap(), 0);
        // Bytes keep a connection alive; silence ends it.
        peers[0].write_all(b"ping").await.unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(accepted[0].read(&mut buf).await.unwrap(), 4);
        let e = accepted[1].read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        drop(accepted);
        assert_eq!(limits.open(), 0);
    }
}
