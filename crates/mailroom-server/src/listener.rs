//! The accept loop's connection cap.
//!
//! Every subscriber holds a connection for as long as it listens, and so does every
//! idle keep-alive client. Past [`CONNECTIONS_MAX`] open connections the server stops
//! accepting until one closes: new clients wait in the kernel's backlog instead of
//! exhausting file descriptors and memory.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most connections served at once.
pub const CONNECTIONS_MAX: usize = 10_000;

/// A TCP listener that holds at most a fixed number of connections open.
#[derive(Debug)]
pub struct CappedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl CappedListener {
    /// Wraps a bound listener; `connections_max` must be at least 1.
    ///
    /// # Panics
    /// If `connections_max` is 0: the server could never serve anyone.
    pub fn new(inner: TcpListener, connections_max: usize) -> CappedListener {
        assert!(
            connections_max > 0,
            "a server must accept at least one connection"
        );
        CappedListener {
            inner,
            permits: Arc::new(Semaphore::new(connections_max)),
        }
    }
}

impl Listener for CappedListener {
    type Io = CappedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CappedStream, SocketAddr) {
        // The semaphore is never closed, so acquiring only waits for a free slot.
        let permit = loop {
            if let Ok(permit) = self.permits.clone().acquire_owned().await {
                break permit;
            }
        };
        // axum's own accept retries transient errors (EMFILE, ECONNABORTED) with backoff.
        let (stream, address) = Listener::accept(&mut self.inner).await;
        // Live channels write small frames as messages come (WebSocket or SSE); with Nagle's
        // algorithm each waits for the ACK of the one before, which the client may delay by
        // tens of milliseconds. Failing to set it only costs latency, so serve regardless.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        (
            CappedStream {
                stream,
                _permit: permit,
            },
            address,
        )
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// A connection that frees its slot when dropped.
#[derive(Debug)]
pub struct CappedStream {
    stream: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl AsyncRead for CappedStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for CappedStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    async fn get(stream: &mut tokio::net::TcpStream) -> String {
        stream.write_all(REQUEST).await.unwrap();
        let mut buffer = vec![0; 1024];
        let read = stream.read(&mut buffer).await.unwrap();
        String::from_utf8_lossy(&buffer[..read]).into_owned()
    }

    // Proves the cap: with one slot, a second client is not served while the first holds
    // its keep-alive connection, and is served as soon as the first disconnects.
    #[tokio::test]
    async fn second_connection_waits_for_a_free_slot() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
        tokio::spawn(async move {
            axum::serve(CappedListener::new(listener, 1), app)
                .await
                .unwrap();
        });

        let mut first = tokio::net::TcpStream::connect(address).await.unwrap();
        assert!(get(&mut first).await.starts_with("HTTP/1.1 200"));
        let mut second = tokio::net::TcpStream::connect(address).await.unwrap();
        second.write_all(REQUEST).await.unwrap();
        let mut buffer = vec![0; 1024];
        // Bounded wait for something that must NOT happen while the slot is taken.
        let early = tokio::time::timeout(
            std::time::Duration::from_millis(200),
            second.read(&mut buffer),
        )
        .await;
        assert!(
            early.is_err(),
            "the second connection was served past the cap"
        );

        drop(first);
        let read = second.read(&mut buffer).await.unwrap();
        assert!(String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"));
    }

    // Proves accepted connections have Nagle's algorithm off (TCP_NODELAY), so small
    // frames go out at once instead of waiting for the peer's delayed ACK.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut capped = CappedListener::new(listener, 1);
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (accepted, _) = Listener::accept(&mut capped).await;
        assert!(accepted.stream.nodelay().unwrap());
    }
}
