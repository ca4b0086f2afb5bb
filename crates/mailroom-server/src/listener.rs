//! The accept loop's connection cap, the answer past it, and accept errors.
//!
//! Every subscriber holds a connection for as long as it listens, and so does every
//! idle keep-alive client. Past the cap (`--max-connections`, at most
//! [`CONNECTIONS_MAX`] by default) a new connection is accepted only to be answered
//! `503 connection_limit` with a JSON body naming the limit, and closed: the client
//! learns why at once instead of waiting in the kernel's backlog. At most
//! [`REJECTIONS_MAX`] such answers are under way at once (each holds a file descriptor
//! for at most [`REJECTION_MS_MAX`]); past that a connection is closed unanswered.
//!
//! When `accept` itself fails for want of file descriptors (`EMFILE`, `ENFILE`) or
//! memory, the loop backs off (from [`ACCEPT_BACKOFF_MS_MIN`], doubling to
//! [`ACCEPT_BACKOFF_MS_MAX`]) rather than spin, and logs at most once per
//! [`ACCEPT_ERROR_LOG_MS`] with the number of failures since the last line.
//!
//! Each accepted socket gets `TCP_NODELAY` and, when configured, a bounded kernel send
//! buffer (`SO_SNDBUF`, `--socket-send-buffer-bytes`): what the kernel queues for a
//! subscriber that stopped reading is then bounded per connection, and what the server
//! queues in user space is the subscriber's mailbox, bounded in count and bytes.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::serve::Listener;
use mailroom_api::{ErrorBody, ErrorCode};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The most connections served at once unless `--max-connections` says otherwise (the
/// default is also bounded by the open-file limit; see [`crate::limits`]).
pub const CONNECTIONS_MAX: usize = 10_000;
/// The largest `--max-connections` accepted.
pub const CONNECTIONS_MAX_LIMIT: usize = 1_000_000;
/// The most over-cap connections being answered `503 connection_limit` at once; these
/// file descriptors are part of the reserve the open-file budget keeps.
pub const REJECTIONS_MAX: usize = 16;
/// The longest an over-cap connection is kept to deliver its 503 and read the client's
/// request out (so the close is clean, not a reset), in milliseconds.
pub const REJECTION_MS_MAX: u64 = 1_000;
/// The first pause after a failed `accept`, in milliseconds.
pub const ACCEPT_BACKOFF_MS_MIN: u64 = 10;
/// The longest pause after failed `accept`s in a row, in milliseconds.
pub const ACCEPT_BACKOFF_MS_MAX: u64 = 1_000;
/// The least time between two log lines about failed `accept`s, in milliseconds.
pub const ACCEPT_ERROR_LOG_MS: u64 = 10_000;

/// A TCP listener that serves at most a fixed number of connections at once and
/// answers the rest `503 connection_limit`.
#[derive(Debug)]
pub struct CappedListener {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    connections_max: usize,
    rejections: Arc<Semaphore>,
    send_buffer_bytes: Option<usize>,
    backoff: AcceptBackoff,
    open: Arc<AtomicUsize>,
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
            connections_max,
            rejections: Arc::new(Semaphore::new(REJECTIONS_MAX)),
            send_buffer_bytes: None,
            backoff: AcceptBackoff::default(),
            open: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Sets `SO_SNDBUF` of every accepted socket to `bytes` (the kernel may round it,
    /// and Linux doubles it for its own bookkeeping).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// use mailroom_server::listener::CappedListener;
    /// let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let listener = CappedListener::new(socket, 100).with_send_buffer_bytes(64 << 10);
    /// # drop(listener);
    /// # Ok(()) }
    /// ```
    pub fn with_send_buffer_bytes(mut self, bytes: usize) -> CappedListener {
        self.send_buffer_bytes = Some(bytes);
        self
    }

    /// Counts the connections being served in `open` (up when one is admitted, down
    /// when it closes), for `/metrics`.
    pub fn counting(mut self, open: Arc<AtomicUsize>) -> CappedListener {
        self.open = open;
        self
    }

    /// The next TCP connection, waiting out accept failures with a backoff.
    async fn accept_tcp(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok(accepted) => {
                    self.backoff.succeeded();
                    return accepted;
                }
                // The peer gave up before we got to it: nothing to wait for.
                Err(error) if is_connection_error(&error) => {}
                Err(error) => {
                    let pause = self.backoff.failed(Instant::now(), &error);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// Sets the socket options of an admitted connection; failing to only costs
    /// latency or memory, so the connection is served regardless.
    fn configure(&self, stream: &TcpStream) {
        // Live channels write small frames as messages come (WebSocket or SSE); with
        // Nagle's algorithm each waits for the ACK of the one before, which the client may
        // delay by tens of milliseconds.
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        if let Some(bytes) = self.send_buffer_bytes {
            if let Err(error) = rustix::net::sockopt::set_socket_send_buffer_size(stream, bytes) {
                tracing::debug!(%error, "cannot set SO_SNDBUF");
            }
        }
    }

    /// Answers an over-cap connection `503 connection_limit` in a task of its own, or
    /// closes it at once when [`REJECTIONS_MAX`] answers are already under way.
    fn reject(&self, stream: TcpStream, address: SocketAddr) {
        let Ok(permit) = self.rejections.clone().try_acquire_owned() else {
            tracing::debug!(%address, "over the connection cap; closed unanswered");
            return;
        };
        let response = rejection_response(self.connections_max);
        tokio::spawn(async move {
            let _permit = permit;
            let answer = answer_and_close(stream, &response);
            // Past the deadline the connection is dropped, whatever it was doing.
            let _ = tokio::time::timeout(Duration::from_millis(REJECTION_MS_MAX), answer).await;
        });
    }
}

/// Whether an `accept` error concerns only the connection being accepted.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

/// The pauses and log lines after failed `accept`s.
#[derive(Debug)]
struct AcceptBackoff {
    /// The next pause.
    pause: Duration,
    /// When the last line was logged.
    logged_at: Option<Instant>,
    /// Failures since the last line.
    unlogged: u64,
}

impl Default for AcceptBackoff {
    fn default() -> AcceptBackoff {
        AcceptBackoff {
            pause: Duration::from_millis(ACCEPT_BACKOFF_MS_MIN),
            logged_at: None,
            unlogged: 0,
        }
    }
}

impl AcceptBackoff {
    /// Notes a failure at `now`; returns how long to pause before the next `accept`.
    fn failed(&mut self, now: Instant, error: &io::Error) -> Duration {
        self.unlogged += 1;
        let quiet = Duration::from_millis(ACCEPT_ERROR_LOG_MS);
        if self
            .logged_at
            .is_none_or(|at| now.duration_since(at) >= quiet)
        {
            tracing::warn!(
                %error,
                failures = self.unlogged,
                "accept failed (out of file descriptors? see --max-connections and \
                 --max-topics); backing off"
            );
            self.logged_at = Some(now);
            self.unlogged = 0;
        }
        let pause = self.pause;
        self.pause = (pause * 2).min(Duration::from_millis(ACCEPT_BACKOFF_MS_MAX));
        pause
    }

    /// Notes a successful `accept`: the next failure pauses briefly again.
    fn succeeded(&mut self) {
        self.pause = Duration::from_millis(ACCEPT_BACKOFF_MS_MIN);
    }
}

/// The whole HTTP/1.1 answer to an over-cap connection.
fn rejection_response(connections_max: usize) -> Vec<u8> {
    let body = ErrorBody {
        error: ErrorCode::ConnectionLimit,
        message: format!(
            "the server holds {connections_max} connections, its limit \
             (--max-connections); try again later"
        ),
    };
    let body = serde_json::to_vec(&body).expect("an error body serializes");
    let mut response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\nretry-after: 1\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    response
}

/// Writes `response`, ends the sending side, and reads what the client sent until it
/// closes: closing with unread bytes would reset the connection, and the client might
/// lose the answer.
async fn answer_and_close(mut stream: TcpStream, response: &[u8]) -> io::Result<()> {
    stream.write_all(response).await?;
    stream.shutdown().await?;
    let mut sink = [0; 4096];
    while stream.read(&mut sink).await? > 0 {}
    Ok(())
}

impl Listener for CappedListener {
    type Io = CappedStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CappedStream, SocketAddr) {
        loop {
            let (stream, address) = self.accept_tcp().await;
            match self.permits.clone().try_acquire_owned() {
                Ok(permit) => {
                    self.configure(&stream);
                    self.open.fetch_add(1, Ordering::Relaxed);
                    let stream = CappedStream {
                        stream,
                        _permit: permit,
                        open: self.open.clone(),
                    };
                    return (stream, address);
                }
                Err(_) => self.reject(stream, address),
            }
        }
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
    open: Arc<AtomicUsize>,
}

impl CappedStream {
    /// Reads the first bytes that have arrived without consuming them (to tell HTTP/2
    /// from HTTP/1.1; see `connections`).
    ///
    /// # Errors
    /// The socket's.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.peek(buf).await
    }
}

impl Drop for CappedStream {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::Relaxed);
    }
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

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    async fn get(stream: &mut tokio::net::TcpStream) -> String {
        stream.write_all(REQUEST).await.unwrap();
        let mut buffer = vec![0; 1024];
        let read = stream.read(&mut buffer).await.unwrap();
        String::from_utf8_lossy(&buffer[..read]).into_owned()
    }

    // Proves the cap: with one slot, a second client is answered 503 with a JSON body
    // naming the limit and closed, while the first keeps its connection; once the first
    // disconnects, a new client is served.
    #[tokio::test]
    async fn connection_past_the_cap_is_answered_503_naming_the_limit() {
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
        let mut answer = String::new();
        second.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap();
        let body: ErrorBody = serde_json::from_str(body).unwrap();
        assert_eq!(body.error, ErrorCode::ConnectionLimit);
        assert!(
            body.message.contains("--max-connections"),
            "{}",
            body.message
        );
        assert!(get(&mut first).await.starts_with("HTTP/1.1 200"));

        drop(first);
        // The slot is freed when the server notices the close: retry until it has.
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let mut third = tokio::net::TcpStream::connect(address).await.unwrap();
            if get(&mut third).await.starts_with("HTTP/1.1 200") {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the slot was never freed"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    // Proves the accept backoff doubles up to its ceiling, starts over after a success,
    // and logs at most once per interval (the rest are counted for the next line).
    #[test]
    fn accept_failures_back_off_and_log_once_per_interval() {
        let mut backoff = AcceptBackoff::default();
        let error = io::Error::from_raw_os_error(24); // EMFILE
        let start = Instant::now();
        let pauses: Vec<u64> = (0..9)
            .map(|_| backoff.failed(start, &error).as_millis() as u64)
            .collect();
        assert_eq!(pauses, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(backoff.unlogged, 8, "only the first failure was logged");
        let later = start + Duration::from_millis(ACCEPT_ERROR_LOG_MS);
        backoff.failed(later, &error);
        assert_eq!(backoff.unlogged, 0, "a line after the interval");
        backoff.succeeded();
        assert_eq!(backoff.failed(later, &error), Duration::from_millis(10));
    }

    // Proves accepted sockets get the configured send buffer: Linux doubles the value
    // asked for, and never gives more.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn accepted_connections_have_a_bounded_send_buffer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut capped = CappedListener::new(listener, 1).with_send_buffer_bytes(32 << 10);
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (accepted, _) = Listener::accept(&mut capped).await;
        let size = rustix::net::sockopt::socket_send_buffer_size(&accepted.stream).unwrap();
        assert!(size <= 64 << 10, "SO_SNDBUF is {size}");
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
