//! Serving accepted connections: HTTP/1.1 with a deadline for each request's head,
//! WebSocket upgrades, panics answered as 500s, and graceful shutdown.
//!
//! axum's own `serve` sets no deadline on reading a request, so a client that sends half
//! a request line and stops (slowloris) would hold one of the
//! [`CONNECTIONS_MAX`](crate::listener::CONNECTIONS_MAX) slots for ever; enough of them and
//! nobody else is served. This loop drives hyper's HTTP/1 connection directly, with a
//! timer, so a head that does not arrive in time closes the connection. Everything else
//! `axum::serve` did is kept: the capped listener (which also sets `TCP_NODELAY`),
//! upgrades, and on shutdown no new connections while open ones finish their request.

use std::future::Future;
use std::time::Duration;

use axum::serve::Listener as _;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower_http::catch_panic::CatchPanicLayer;

use crate::error::panic_response;
use crate::listener::{CappedListener, CappedStream};

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
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(options.header_read_timeout);
    let (stopping_tx, stopping_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            (stream, address) = listener.accept() => {
                tracing::trace!(%address, "connection accepted");
                let connection = serve_one(&builder, stream, app.clone(), stopping_rx.clone());
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

/// Serves one connection until it closes, or until shutdown and the end of the request
/// it is on.
fn serve_one(
    builder: &http1::Builder,
    stream: CappedStream,
    app: Router,
    mut stopping: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let service = TowerToHyperService::new(app);
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    async move {
        let mut connection = std::pin::pin!(connection);
        // An error means the accept loop is gone, which also means stop.
        let stop = async move {
            let _ = stopping.wait_for(|stopping| *stopping).await;
        };
        let served = tokio::select! {
            served = connection.as_mut() => served,
            () = stop => {
                connection.as_mut().graceful_shutdown();
                connection.await
            }
        };
        // Timeouts, resets and malformed requests end here; none is the server's fault.
        if let Err(error) = served {
            tracing::debug!(%error, "connection ended with an error");
        }
    }
}
