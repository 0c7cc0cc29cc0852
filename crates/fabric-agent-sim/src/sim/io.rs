//! Agent connections that the simulator can cut (`kill`, `drop`).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tonic::transport::server::Connected;

/// A TCP connection that fails all I/O once its agent's epoch moves (kill / drop connections).
pub(super) struct KillableIo {
    pub(super) inner: TcpStream,
    pub(super) epoch: Arc<AtomicU64>,
    pub(super) born: u64,
}

impl KillableIo {
    fn dead(&self) -> bool {
        self.epoch.load(Ordering::SeqCst) != self.born
    }
}

fn reset() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "agent connection dropped by the simulator",
    )
}

impl AsyncRead for KillableIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.dead() {
            return Poll::Ready(Err(reset()));
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Connected for KillableIo {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}
