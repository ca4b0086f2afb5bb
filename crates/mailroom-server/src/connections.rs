//! Serving accepted connections: HTTP/1.1 with a deadline for each request's head,
//! cleartext HTTP/2 (h2c with prior knowledge) on the same port, WebSocket upgrades,
//! panics answered as 500s, and graceful shutdown.
//!
//! axum's own `serve` sets no deadline on reading a request, so a client that sends half
//! a request line and stops (slowloris) would hold one of the
//! [`CONNECTIONS_MAX`](crate::listener::CONNECTIONS_MAX) slots for ever; enough of them and
//! nobody else is served. This loop drives hyper's connections directly, with a timer, so
//! a head that does not arrive in time closes the connection. Everything else
//! `axum::serve` did is kept: the capped listener (which also sets `TCP_NODELAY`),
//! upgrades, and on shutdown no new connections while open ones finish their request.
//!
//! Which protocol a connection speaks is read from its first bytes (peeked, not consumed)
//! within the same deadline: the HTTP/2 connection preface ([`H2_PREFACE`]) means HTTP/2,
//! anything else HTTP/1.1, and a client that sends neither in time is closed, as a silent
//! HTTP/1.1 client always was. hyper-util's auto builder does the same detection but with
//! no deadline, which would let silent clients hold slots again. An HTTP/2 connection
//! carries up to [`H2_STREAMS_MAX`] requests at once; it is pinged every
//! [`H2_PING_INTERVAL`] and closed when a ping is not answered within the head deadline, so
//! a vanished or stalled HTTP/2 peer is evicted like a slow HTTP/1.1 one. HTTP/2 has no
//! idle deadline of its own: an idle connection that answers pings stays open (one slot of
//! the connection cap, as an idle subscriber's does). WebSocket upgrades stay on HTTP/1.1.
//! TLS (and with it HTTP/2 negotiated by ALPN) is not built into the server: a reverse
//! proxy terminates it (see `docs/operations.md`).

use std::future::Future;
use std::time::Duration;

use axum::serve::Listener as _;
use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower_http::catch_panic::CatchPanicLayer;

use crate::error::panic_response;
use crate::listener::{CappedListener, CappedStream};

/// The first bytes of every HTTP/2 connection with prior knowledge (RFC 9113, 3.4).
pub const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Requests one HTTP/2 connection may have under way at once.
pub const H2_STREAMS_MAX: u32 = 256;
/// How often an HTTP/2 connection is pinged to learn whether its peer is still there.
pub const H2_PING_INTERVAL: Duration = Duration::from_secs(20);
/// The pause between two looks at a connection's first bytes while they are still a
/// part of the HTTP/2 preface (rare: clients send the preface in one write).
const SNIFF_RETRY: Duration = Duration::from_millis(2);

/// How every connection is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionOptions {
    /// How long the server waits for a complete request head, from the accept or from
    /// the end of the previous response; past it the connection is closed unanswered.
    pub header_read_timeout: Duration,
}

/// Serves `app` on every connection `listener` accepts until `shutdown` completes; then
/// closes the listening socket, asks every open connection to close after the request it
/// is on (idle ones close at once), and returns when all have.
///
/// Each connection gets a catch-panic layer around `app`: a handler that panics costs its
/// request a 500 `internal` answer ([`panic_response`]), not the connection. Connections
/// still open when the returned future is dropped are dropped with it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use std::time::Duration;
/// use mailroom_server::connections::{serve_connections, ConnectionOptions};
/// use mailroom_server::listener::CappedListener;
///
/// let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let app = axum::Router::new().route("/", axum::routing::get(|| async { "hi" }));
/// let options = ConnectionOptions { header_read_timeout: Duration::from_secs(10) };
/// // Serves until the shutdown future completes: here, at once.
/// serve_connections(CappedListener::new(socket, 100), app, options, async {}).await;
/// # Ok(()) }
/// ```
pub async fn serve_connections<F>(
    mut listener: CappedListener,
    app: Router,
    options: ConnectionOptions,
    shutdown: F,
) where
    F: Future<Output = ()> + Send,
{
    let app = app.layer(CatchPanicLayer::custom(
        panic_response as fn(_) -> axum::response::Response,
    ));
    let builders = Builders::new(options);
    let (stopping_tx, stopping_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            (stream, address) = listener.accept() => {
                tracing::trace!(%address, "connection accepted");
                let connection = serve_one(builders.clone(), stream, app.clone(), stopping_rx.clone());
                connections.spawn(connection);
            }
            // Reap finished connections as they go, so the set holds only open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    // `send` fails only when no connection holds a receiver, which leaves nothing to stop.
    let _ = stopping_tx.send(true);
    while connections.join_next().await.is_some() {}
}

/// The connection builders of both protocols, set up once.
#[derive(Clone)]
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
    header_read_timeout: Duration,
}

impl Builders {
    fn new(options: ConnectionOptions) -> Builders {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read_timeout);
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(H2_STREAMS_MAX)
            .keep_alive_interval(Some(H2_PING_INTERVAL))
            .keep_alive_timeout(options.header_read_timeout);
        Builders {
            http1,
            http2,
            header_read_timeout: options.header_read_timeout,
        }
    }
}

/// The protocol a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// Which protocol `first` (a connection's first bytes) begins, or `None` while they are
/// still a strict part of the HTTP/2 preface.
fn protocol_of(first: &[u8]) -> Option<Protocol> {
    if first.len() >= H2_PREFACE.len() || !H2_PREFACE.starts_with(first) {
        Some(if first.starts_with(H2_PREFACE) {
            Protocol::Http2
        } else {
            Protocol::Http1
        })
    } else {
        None
    }
}

/// Peeks at the connection's first bytes until they name its protocol; `None` when the
/// client closed, failed, or named none within `timeout`.
async fn sniff(stream: &CappedStream, timeout: Duration) -> Option<Protocol> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut first = [0; H2_PREFACE.len()];
    loop {
        let peeked = tokio::time::timeout_at(deadline, stream.peek(&mut first)).await;
        let read = match peeked {
            Ok(Ok(read)) if read > 0 => read,
            _ => return None,
        };
        if let Some(protocol) = protocol_of(&first[..read]) {
            return Some(protocol);
        }
        // The timeout above polls the peek first, which is ready while bytes sit unread,
        // so it alone would never end a client that stopped mid-preface.
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        // peek returns at once while the bytes it saw are unread, so wait a little.
        tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + SNIFF_RETRY)).await;
    }
}

/// Serves one connection until it closes, or until shutdown and the end of the
/// request(s) it is on.
fn serve_one(
    builders: Builders,
    stream: CappedStream,
    app: Router,
    mut stopping: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let service = TowerToHyperService::new(app);
    async move {
        let protocol = tokio::select! {
            protocol = sniff(&stream, builders.header_read_timeout) => protocol,
            _ = stopping.wait_for(|stopping| *stopping) => None,
        };
        // Timeouts, resets and malformed requests end here; none is the server's fault.
        let served = match protocol {
            None => return,
            Some(Protocol::Http1) => {
                let connection = builders
                    .http1
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades();
                until_stopped(connection, stopping, |c| c.graceful_shutdown()).await
            }
            Some(Protocol::Http2) => {
                let connection = builders
                    .http2
                    .serve_connection(TokioIo::new(stream), service);
                until_stopped(connection, stopping, |c| c.graceful_shutdown()).await
            }
        };
        if let Err(error) = served {
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}

/// Drives `connection` to its end; once shutdown begins, asks it to finish (`graceful`)
/// and waits for that.
async fn until_stopped<C, T, E>(
    connection: C,
    mut stopping: watch::Receiver<bool>,
    graceful: fn(std::pin::Pin<&mut C>),
) -> Result<T, E>
where
    C: Future<Output = Result<T, E>>,
{
    let mut connection = std::pin::pin!(connection);
    // An error means the accept loop is gone, which also means stop.
    let stop = async move {
        let _ = stopping.wait_for(|stopping| *stopping).await;
    };
    tokio::select! {
        served = connection.as_mut() => served,
        () = stop => {
            graceful(connection.as_mut());
            connection.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the preface decides: all of it is HTTP/2, a part of it waits for more, and
    // any other start (including HTTP/1.1 methods sharing its first letter) is HTTP/1.1.
    #[test]
    fn first_bytes_name_the_protocol() {
        assert_eq!(protocol_of(H2_PREFACE), Some(Protocol::Http2));
        let mut more = H2_PREFACE.to_vec();
        more.extend_from_slice(b"\0\0\0\x04");
        assert_eq!(
            protocol_of(&more[..H2_PREFACE.len()]),
            Some(Protocol::Http2)
        );
        assert_eq!(protocol_of(b"P"), None);
        assert_eq!(protocol_of(b"PRI * HTTP/2"), None);
        assert_eq!(
            protocol_of(b"PUT /v1/topics/t HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(protocol_of(b"POST"), Some(Protocol::Http1));
        assert_eq!(
            protocol_of(b"GET / HTTP/1.1\r\n\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(
            protocol_of(b"PRI * HTTP/1.1\r\n\r\nSM\r\n\r\n"),
            Some(Protocol::Http1)
        );
    }
}
