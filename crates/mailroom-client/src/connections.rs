//! The client's HTTP/1.1 connections to its one server, kept open and reused: a call takes
//! an idle connection (or opens one), sends its request, reads the whole answer and puts
//! the connection back.
//!
//! A general pool (`hyper-util`'s legacy client) keys its connections by scheme and
//! authority for any number of servers: two SipHash map lookups, an authority compared
//! and a `Host` header derived on every request, about 5,500 instructions of an unbatched
//! publish under callgrind. A client talks to one server, so its pool is one list.
//!
//! Limits: at most [`IDLE_CONNECTIONS_MAX`] idle connections are kept (more are closed
//! when their call ends), and one idle for longer than [`IDLE_TIMEOUT`] is closed instead
//! of reused. A request that an idle connection could not send because the server had
//! just closed it goes once more over a new connection; one that was sent is never sent
//! twice.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::HOST;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::error::HttpError;
use crate::timeouts::within;
use crate::{ClientError, TimeoutLimit};

/// The most idle connections a client (and its clones) keeps open; a connection coming
/// back from its call when this many wait is closed. Calls in flight at once are not
/// limited by it: each takes a connection, opening one if none is idle.
///
/// ```
/// assert!(mailroom_client::IDLE_CONNECTIONS_MAX >= 16);
/// ```
pub const IDLE_CONNECTIONS_MAX: usize = 256;

/// How long an idle connection is kept for reuse before it is closed (`hyper-util`'s
/// pool default too), so connections of a burst do not stay open for good.
///
/// ```
/// assert_eq!(mailroom_client::IDLE_TIMEOUT.as_secs(), 90);
/// ```
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

type Sender = SendRequest<Full<Bytes>>;

/// The connections of one client and its clones.
#[derive(Clone)]
pub(crate) struct Connections {
    shared: Arc<Shared>,
}

struct Shared {
    /// Host and port to connect to (an IPv6 address without its brackets).
    host: String,
    port: u16,
    /// The `Host` header of every request.
    host_header: HeaderValue,
    connect_timeout: Duration,
    /// Idle connections, the most recently used last.
    idle: Mutex<Vec<Idle>>,
}

struct Idle {
    sender: Sender,
    since: Instant,
}

impl fmt::Debug for Connections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let idle = self.lock_idle().len();
        f.debug_struct("Connections")
            .field("host", &self.shared.host)
            .field("port", &self.shared.port)
            .field("idle", &idle)
            .finish()
    }
}

impl Connections {
    /// Connections to `host:port`, sending `host_header` as every request's `Host`.
    pub(crate) fn new(
        host: String,
        port: u16,
        host_header: HeaderValue,
        connect_timeout: Duration,
    ) -> Connections {
        Connections {
            shared: Arc::new(Shared {
                host,
                port,
                host_header,
                connect_timeout,
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Where the connections go and the `Host` they send, for tests.
    #[cfg(test)]
    pub(crate) fn target(&self) -> (&str, u16, &str) {
        let shared = &self.shared;
        let header = shared.host_header.to_str().unwrap_or_default();
        (shared.host.as_str(), shared.port, header)
    }

    /// Sends `request` (its URI in origin form, the path and query) and reads the whole
    /// answer. Dropping the future drops its connection, which closes it.
    pub(crate) async fn exchange(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        request
            .headers_mut()
            .insert(HOST, self.shared.host_header.clone());
        let request = match self.take_idle() {
            Some(mut sender) => match Self::send(&mut sender, request).await {
                Outcome::Answered(answer) => return self.finish(sender, answer).await,
                Outcome::Failed(error) => return Err(error.into()),
                Outcome::Returned(request) => request,
            },
            None => request,
        };
        let mut sender = self.connect().await?;
        match Self::send(&mut sender, request).await {
            Outcome::Answered(answer) => self.finish(sender, answer).await,
            Outcome::Failed(error) => Err(error.into()),
            Outcome::Returned(_) => Err(HttpError::new(
                "the request failed",
                false,
                "the server closed a new connection before the request went out".into(),
            )
            .into()),
        }
    }

    async fn send(sender: &mut Sender, request: Request<Full<Bytes>>) -> Outcome {
        if sender.ready().await.is_err() {
            return Outcome::Returned(request);
        }
        match sender.try_send_request(request).await {
            Ok(response) => Outcome::Answered(response),
            Err(mut error) => match error.take_message() {
                Some(request) => Outcome::Returned(request),
                None => Outcome::Failed(HttpError::new(
                    "the request failed",
                    false,
                    Box::new(error.into_error()),
                )),
            },
        }
    }

    /// Reads the answer's body to its end, then keeps the connection for the next call.
    ///
    /// The connection can take the next request only once its task has seen the answer
    /// end, which it may not have yet when the body's last bytes arrive here. Such a
    /// connection is put back by a task of its own once it is ready (as `hyper-util`'s
    /// pool does), so a call never waits on a connection still finishing another call's
    /// answer: it takes another or opens one.
    async fn finish(
        &self,
        mut sender: Sender,
        response: http::Response<hyper::body::Incoming>,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(HttpError::from)?
            .to_bytes();
        if sender.is_ready() {
            self.put_idle(sender);
        } else {
            let connections = self.clone();
            tokio::spawn(async move {
                if sender.ready().await.is_ok() {
                    connections.put_idle(sender);
                }
            });
        }
        Ok((status, body))
    }

    /// The most recently used idle connection that is still open and young enough.
    fn take_idle(&self) -> Option<Sender> {
        let mut idle = self.lock_idle();
        while let Some(entry) = idle.pop() {
            if !entry.sender.is_closed() && entry.since.elapsed() < IDLE_TIMEOUT {
                return Some(entry.sender);
            }
        }
        None
    }

    fn put_idle(&self, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        let mut idle = self.lock_idle();
        // The oldest are first; those past the timeout go now rather than at their reuse.
        let stale = idle
            .iter()
            .take_while(|entry| entry.since.elapsed() >= IDLE_TIMEOUT)
            .count();
        idle.drain(..stale);
        if idle.len() < IDLE_CONNECTIONS_MAX {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// A new connection, within the connect limit, with `TCP_NODELAY`: one request waits
    /// for its answer before the next, and Nagle would hold a request's last segment back
    /// for the previous answer's ACK.
    async fn connect(&self) -> Result<Sender, ClientError> {
        let shared = &self.shared;
        let connecting = async {
            let stream = TcpStream::connect((shared.host.as_str(), shared.port)).await?;
            stream.set_nodelay(true)?;
            Ok::<_, std::io::Error>(stream)
        };
        let stream = within(TimeoutLimit::Connect, shared.connect_timeout, async {
            connecting
                .await
                .map_err(|error| HttpError::new("could not connect", true, Box::new(error)))
        })
        .await?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|error| HttpError::new("could not connect", true, Box::new(error)))?;
        // The connection's errors reach the sender's calls; nothing else waits on it.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Idle>> {
        // The list stays whole whatever panicked while it was held: a push or a pop.
        self.shared
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What became of a request given to a connection.
enum Outcome {
    Answered(http::Response<hyper::body::Incoming>),
    /// The connection closed before the request went out; here it is back.
    Returned(Request<Full<Bytes>>),
    Failed(HttpError),
}
