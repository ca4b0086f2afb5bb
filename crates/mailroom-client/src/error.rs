//! The client's error type.

use std::time::Duration;

use mailroom_api::{ErrorCode, InvalidName, NameKind};

/// Why a client call failed.
///
/// [`ClientError::Api`] carries the server's stable [`ErrorCode`] (`unknown_topic`,
/// `not_owned`, ...), which is what callers should match on; [`ClientError::InvalidName`]
/// is a name the client refused before sending anything; the other variants are
/// transport failures.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error status and a JSON error body.
    #[error("server said {status} {code}: {message}")]
    Api {
        /// The HTTP status code.
        status: u16,
        /// The stable error code from the body ([`ErrorCode::Other`] `"http_<status>"` if
        /// the body had none).
        code: ErrorCode,
        /// The human-readable message from the body.
        message: String,
    },
    /// The base URL could not be turned into a request URL.
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    /// A topic, group or channel name breaks the [name rule](mailroom_api::names); no
    /// request was sent. It reads as the server's `invalid_name` message would.
    #[error(transparent)]
    InvalidName(#[from] InvalidName),
    /// A time limit of the client's [`Timeouts`](crate::Timeouts) ran out: the server
    /// did not accept the connection, or did not answer, in time.
    #[error("{limit} timed out after {} ms", after.as_millis())]
    Timeout {
        /// Which limit ran out.
        limit: TimeoutLimit,
        /// How long it was (for a long poll, the wait plus the request limit).
        after: Duration,
    },
    /// A request could not be encoded (a header value with a line break, say); nothing
    /// was sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The HTTP request failed: connection refused, reset, ...
    #[error("http: {0}")]
    Http(#[from] HttpError),
    /// The WebSocket handshake or stream failed.
    #[error("websocket: {0}")]
    WebSocket(#[from] Box<tokio_tungstenite::tungstenite::Error>),
    /// A [`PublishStream`](crate::PublishStream) ended with messages still unconfirmed.
    /// If the server closed it (after an error entry that ends the stream, such as
    /// `unknown_topic`; the reason is that code), it had confirmed or refused everything
    /// it read, so those messages were not published; if the connection just broke,
    /// their fate is unknown.
    #[error("publish stream closed ({reason}) with {unconfirmed} messages unconfirmed")]
    StreamClosed {
        /// The server's close reason (its error code), or how the connection ended.
        reason: String,
        /// Messages sent whose confirmation will never come.
        unconfirmed: u64,
    },
    /// The server's answer did not have the documented shape.
    #[error("unexpected response: {0}")]
    UnexpectedResponse(String),
}

/// Which of the client's [`Timeouts`](crate::Timeouts) ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeoutLimit {
    /// Opening the TCP connection (name lookup included).
    Connect,
    /// Waiting for the answer to a request, or for a WebSocket handshake's upgrade.
    Request,
}

impl std::fmt::Display for TimeoutLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutLimit::Connect => "connecting",
            TimeoutLimit::Request => "request",
        })
    }
}

impl ClientError {
    /// The server's stable error code as text, if the server answered with one.
    ///
    /// ```
    /// use mailroom_client::{ClientError, ErrorCode};
    /// let error = ClientError::Api { status: 404, code: ErrorCode::UnknownTopic, message: "no".into() };
    /// assert_eq!(error.code(), Some("unknown_topic"));
    /// assert_eq!(error.error_code(), Some(&ErrorCode::UnknownTopic));
    /// assert_eq!(error.status(), Some(404));
    /// ```
    pub fn code(&self) -> Option<&str> {
        self.error_code().map(ErrorCode::as_str)
    }

    /// The server's stable error code, if the server answered with one.
    pub fn error_code(&self) -> Option<&ErrorCode> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The [`ClientError::Api`] of an error status, from its body when that is the
    /// standard `{"error", "message"}` shape, else from the status and the raw text.
    pub(crate) fn from_answer(status: u16, body: &[u8]) -> ClientError {
        match serde_json::from_slice::<mailroom_api::ErrorBody>(body) {
            Ok(parsed) => ClientError::Api {
                status,
                code: parsed.error,
                message: parsed.message,
            },
            Err(_) => ClientError::Api {
                status,
                code: ErrorCode::Other(format!("http_{status}")),
                message: String::from_utf8_lossy(body).into_owned(),
            },
        }
    }

    /// Checks `name` against the name rule before it goes into a request.
    pub(crate) fn check_name(kind: NameKind, name: &str) -> Result<(), ClientError> {
        Ok(mailroom_api::names::check(kind, name)?)
    }

    /// Whether a time limit ran out ([`ClientError::Timeout`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use mailroom_client::{ClientError, TimeoutLimit};
    /// let error = ClientError::Timeout { limit: TimeoutLimit::Request, after: Duration::from_millis(200) };
    /// assert!(error.is_timeout());
    /// assert_eq!(error.to_string(), "request timed out after 200 ms");
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, ClientError::Timeout { .. })
    }

    /// The HTTP status of an API error.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}

impl From<tokio_tungstenite::tungstenite::Error> for ClientError {
    fn from(error: tokio_tungstenite::tungstenite::Error) -> Self {
        ClientError::WebSocket(Box::new(error))
    }
}

/// A failure of the HTTP transport under a call ([`ClientError::Http`]): the connection
/// could not be made, broke, or the answer could not be read. The cause is its
/// [`source`](std::error::Error::source).
///
/// ```no_run
/// # async fn demo() {
/// use mailroom_client::{Client, ClientError};
/// // Nothing listens on port 9 here: the connection is refused.
/// let client = Client::new("http://127.0.0.1:9").unwrap();
/// match client.list_topics().await {
///     Err(ClientError::Http(http)) => assert!(http.is_connect()),
///     other => panic!("expected a transport error, got {other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("{what}: {root}")]
pub struct HttpError {
    what: &'static str,
    /// The innermost cause's message (`Connection refused (os error 111)`), which the
    /// transport's own message ("client error (Connect)") does not say.
    root: String,
    connect: bool,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl HttpError {
    /// Whether the connection could not be made (refused, unreachable, name not found).
    pub fn is_connect(&self) -> bool {
        self.connect
    }

    /// Whether an I/O timeout is among the causes (the connect limit, enforced by the
    /// connector).
    pub(crate) fn timed_out(&self) -> bool {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(self.source.as_ref());
        while let Some(error) = cause {
            if error
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
            {
                return true;
            }
            cause = error.source();
        }
        false
    }
}

impl HttpError {
    fn new(
        what: &'static str,
        connect: bool,
        source: Box<dyn std::error::Error + Send + Sync>,
    ) -> HttpError {
        let mut root: &(dyn std::error::Error + 'static) = source.as_ref();
        while let Some(cause) = root.source() {
            root = cause;
        }
        HttpError {
            what,
            root: root.to_string(),
            connect,
            source,
        }
    }
}

impl From<hyper_util::client::legacy::Error> for HttpError {
    fn from(error: hyper_util::client::legacy::Error) -> Self {
        let connect = error.is_connect();
        let what = if connect {
            "could not connect"
        } else {
            "the request failed"
        };
        HttpError::new(what, connect, Box::new(error))
    }
}

impl From<hyper::Error> for HttpError {
    fn from(error: hyper::Error) -> Self {
        HttpError::new("the answer could not be read", false, Box::new(error))
    }
}
