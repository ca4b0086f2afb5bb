//! Server settings: defaults, an optional TOML file, and flags or environment variables
//! on top, in that order of precedence (later wins).

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;

use mailroom_store::IdempotencyWindow;

mod checks;
mod fsync;
mod layer;

pub use fsync::{FsyncPolicy, FSYNC_INTERVAL_MS_MAX};
pub use layer::ConfigLayer;

/// The address `mailroom serve` listens on unless told otherwise.
pub const LISTEN_DEFAULT: &str = "127.0.0.1:7070";
/// The data directory unless told otherwise, relative to the working directory.
pub const DATA_DIR_DEFAULT: &str = "mailroom-data";
// The largest message body accepted unless told otherwise (1 MiB), and the largest value
// `--max-payload-bytes` accepts (the store frames records with a 32-bit length, and one
// request must fit comfortably in memory): limits of the wire format.
pub use mailroom_api::limits::{PAYLOAD_BYTES_MAX_DEFAULT, PAYLOAD_BYTES_MAX_LIMIT};
/// How long a connection may take to deliver a request's head (request line and
/// headers), and how long an idle keep-alive connection may wait for its next request,
/// unless told otherwise: 10 seconds.
pub const HEADER_READ_TIMEOUT_MS_DEFAULT: u64 = 10_000;
/// The longest `--header-read-timeout-ms` accepted: ten minutes. Beyond that the limit
/// no longer protects the connection cap from clients that hold sockets open for free.
pub const HEADER_READ_TIMEOUT_MS_MAX: u64 = 600_000;
/// How often the background task applies retention unless told otherwise: 10 seconds.
pub const RETENTION_INTERVAL_MS_DEFAULT: u64 = 10_000;
/// The shortest `--retention-interval-ms` accepted (each pass looks at every topic).
pub const RETENTION_INTERVAL_MS_MIN: u64 = 10;
/// The longest `--retention-interval-ms` accepted: one day.
pub const RETENTION_INTERVAL_MS_MAX: u64 = 86_400_000;
/// The size at which a topic's message log starts a new segment unless told otherwise
/// (64 MiB). Retention deletes whole segments, so this is how finely it cuts.
pub const SEGMENT_BYTES_DEFAULT: u64 = 64 << 20;
/// The smallest `--segment-bytes` accepted: 4 KiB.
pub const SEGMENT_BYTES_MIN: u64 = 4096;
/// The largest `--segment-bytes` accepted: the store's limit, 1 GiB.
pub const SEGMENT_BYTES_MAX: u64 = mailroom_store::log::SEGMENT_BYTES_LIMIT;
/// The kernel send buffer (`SO_SNDBUF`) of every accepted connection unless told
/// otherwise: 256 KiB. It bounds what the kernel queues for a client that stopped
/// reading (a subscriber, say); Linux doubles the value and caps it at
/// `net.core.wmem_max`.
pub const SOCKET_SEND_BUFFER_BYTES_DEFAULT: usize = 256 << 10;
/// The smallest `--socket-send-buffer-bytes` accepted: 4 KiB.
pub const SOCKET_SEND_BUFFER_BYTES_MIN: usize = 4096;
/// The largest `--socket-send-buffer-bytes` accepted: 64 MiB.
pub const SOCKET_SEND_BUFFER_BYTES_MAX: usize = 64 << 20;
pub use crate::limits::TOPICS_MAX_LIMIT;
pub use crate::listener::CONNECTIONS_MAX_LIMIT;
// The bounds of the retention defaults are the wire's bounds of a topic's own limits.
pub use mailroom_api::limits::{RETENTION_AGE_MS_MAX, RETENTION_BYTES_MAX};

/// Why the settings could not be put together.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A setting's value is out of range or malformed.
    #[error("invalid {setting}: {reason}")]
    Invalid {
        /// The setting's name as on the command line, without dashes.
        setting: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The config file could not be read.
    #[error("reading config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The config file is not valid TOML or has unknown keys.
    #[error("parsing config file {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        source: Box<toml::de::Error>,
    },
}

/// The server's settings, resolved and checked.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// The store's directory.
    pub data_dir: PathBuf,
    /// When the store syncs.
    pub fsync: FsyncPolicy,
    /// The bearer token every `/v1` call must carry, if set.
    pub token: Option<String>,
    /// The largest message body accepted, in bytes.
    pub payload_bytes_max: u64,
    /// How long a connection may take to deliver a request's head, counted from when the
    /// server starts waiting for it: from the accept, or from the end of the previous
    /// response on a keep-alive connection (so this also closes idle keep-alive
    /// connections). A connection that misses it is closed without an answer; it is what
    /// stops a client that trickles bytes (slowloris) from holding one of the
    /// [`CONNECTIONS_MAX`](crate::listener::CONNECTIONS_MAX) slots for ever. Requests
    /// being handled (a long poll) and upgraded or streaming connections (WebSocket, SSE)
    /// are not affected.
    pub header_read_timeout_ms: u64,
    /// The origins (`scheme://host[:port]`, normalized by
    /// [`parse_origin`](crate::browser::origins::parse_origin)) that get CORS headers and
    /// may write from a browser; empty: CORS off, only the server's own origin writes.
    pub cors_origins: Vec<String>,
    /// The age limit of every topic that has none of its own (`None`: unlimited).
    pub retention_max_age_ms: Option<u64>,
    /// The size limit of every topic that has none of its own (`None`: unlimited).
    pub retention_max_bytes: Option<u64>,
    /// How often the background task applies retention, in milliseconds.
    pub retention_interval_ms: u64,
    /// The size at which every log (message and groups logs) starts a new segment.
    pub segment_bytes: u64,
    /// The most topics the store holds; `None`: sized from the open-file limit at start
    /// ([`crate::limits`]), and [`Server::start`](crate::Server::start) fills in the
    /// value in force.
    pub topics_max: Option<usize>,
    /// The most connections served at once; `None`: sized from the open-file limit at
    /// start, as `topics_max`.
    pub connections_max: Option<usize>,
    /// The kernel send buffer (`SO_SNDBUF`) of every accepted connection, in bytes.
    pub socket_send_buffer_bytes: usize,
    /// The PostgreSQL database to keep everything in (`postgres://...`), or `None` for
    /// the embedded store in `data_dir` (see `docs/scale-out.md`).
    pub store: Option<String>,
    /// How many of a topic's newest messages its idempotency window covers
    /// (`--idempotency-window-messages`).
    pub idempotency_window_messages: u64,
    /// How long a topic's idempotency window remembers a key, in milliseconds
    /// (`--idempotency-window-ms`).
    pub idempotency_window_ms: u64,
}

impl fmt::Debug for Config {
    // The token is a secret: logs and panics show whether one is set, never its value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("listen", &self.listen)
            .field("data_dir", &self.data_dir)
            .field("fsync", &self.fsync)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("payload_bytes_max", &self.payload_bytes_max)
            .field("header_read_timeout_ms", &self.header_read_timeout_ms)
            .field("cors_origins", &self.cors_origins)
            .field("retention_max_age_ms", &self.retention_max_age_ms)
            .field("retention_max_bytes", &self.retention_max_bytes)
            .field("retention_interval_ms", &self.retention_interval_ms)
            .field("segment_bytes", &self.segment_bytes)
            .field("topics_max", &self.topics_max)
            .field("connections_max", &self.connections_max)
            .field("socket_send_buffer_bytes", &self.socket_send_buffer_bytes)
            .field("store", &self.store.as_deref().map(without_password))
            .field(
                "idempotency_window_messages",
                &self.idempotency_window_messages,
            )
            .field("idempotency_window_ms", &self.idempotency_window_ms)
            .finish()
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: LISTEN_DEFAULT.parse().expect("the default address parses"),
            data_dir: PathBuf::from(DATA_DIR_DEFAULT),
            fsync: FsyncPolicy::Always,
            token: None,
            payload_bytes_max: PAYLOAD_BYTES_MAX_DEFAULT,
            header_read_timeout_ms: HEADER_READ_TIMEOUT_MS_DEFAULT,
            cors_origins: Vec::new(),
            retention_max_age_ms: None,
            retention_max_bytes: None,
            retention_interval_ms: RETENTION_INTERVAL_MS_DEFAULT,
            segment_bytes: SEGMENT_BYTES_DEFAULT,
            topics_max: None,
            connections_max: None,
            socket_send_buffer_bytes: SOCKET_SEND_BUFFER_BYTES_DEFAULT,
            store: None,
            idempotency_window_messages: IdempotencyWindow::default().messages_max,
            idempotency_window_ms: IdempotencyWindow::default().age_ms_max,
        }
    }
}

impl Config {
    /// The defaults, overlaid by `file` and then by `flags`, then checked.
    ///
    /// ```
    /// use mailroom_server::config::{Config, ConfigLayer};
    /// let file = ConfigLayer { max_payload_bytes: Some(4096), token: Some("a".into()), ..Default::default() };
    /// let flags = ConfigLayer { token: Some("b".into()), ..Default::default() };
    /// let config = Config::resolve(flags, Some(file)).unwrap();
    /// assert_eq!(config.payload_bytes_max, 4096);
    /// assert_eq!(config.token.as_deref(), Some("b"));
    /// assert_eq!(config.listen.to_string(), "127.0.0.1:7070");
    /// ```
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for an empty token, a payload limit of 0 or above
    /// [`PAYLOAD_BYTES_MAX_LIMIT`], or a header read timeout of 0 or above
    /// [`HEADER_READ_TIMEOUT_MS_MAX`], or a CORS origin that is not `http(s)://HOST[:PORT]`.
    pub fn resolve(flags: ConfigLayer, file: Option<ConfigLayer>) -> Result<Config, ConfigError> {
        let file = file.unwrap_or_default();
        let defaults = Config::default();
        let config = Config {
            listen: flags.listen.or(file.listen).unwrap_or(defaults.listen),
            data_dir: flags.data.or(file.data).unwrap_or(defaults.data_dir),
            fsync: flags.fsync.or(file.fsync).unwrap_or(defaults.fsync),
            token: flags.token.or(file.token),
            payload_bytes_max: flags
                .max_payload_bytes
                .or(file.max_payload_bytes)
                .unwrap_or(defaults.payload_bytes_max),
            header_read_timeout_ms: flags
                .header_read_timeout_ms
                .or(file.header_read_timeout_ms)
                .unwrap_or(defaults.header_read_timeout_ms),
            cors_origins: checks::cors_origins(flags.cors_origins.or(file.cors_origins))?,
            retention_max_age_ms: flags.retention_max_age_ms.or(file.retention_max_age_ms),
            retention_max_bytes: flags.retention_max_bytes.or(file.retention_max_bytes),
            retention_interval_ms: flags
                .retention_interval_ms
                .or(file.retention_interval_ms)
                .unwrap_or(defaults.retention_interval_ms),
            segment_bytes: flags
                .segment_bytes
                .or(file.segment_bytes)
                .unwrap_or(defaults.segment_bytes),
            topics_max: flags.max_topics.or(file.max_topics),
            connections_max: flags.max_connections.or(file.max_connections),
            socket_send_buffer_bytes: flags
                .socket_send_buffer_bytes
                .or(file.socket_send_buffer_bytes)
                .unwrap_or(defaults.socket_send_buffer_bytes),
            store: flags.store.or(file.store),
            idempotency_window_messages: flags
                .idempotency_window_messages
                .or(file.idempotency_window_messages)
                .unwrap_or(defaults.idempotency_window_messages),
            idempotency_window_ms: flags
                .idempotency_window_ms
                .or(file.idempotency_window_ms)
                .unwrap_or(defaults.idempotency_window_ms),
        };
        config.check_all()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests;

/// A store URL with its password (if any) left out, for logs.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:<password>@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}
