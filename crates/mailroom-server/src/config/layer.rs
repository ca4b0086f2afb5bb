//! One layer of settings (the config file, or the flags and environment variables), every
//! field optional.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{ConfigError, FsyncPolicy};

/// One source of settings, every field optional: the config file, or the flags and
/// environment variables. [`Config::resolve`](super::Config::resolve) layers them over
/// the defaults.
///
/// In TOML the keys are the long flag names with underscores:
///
/// ```
/// use mailroom_server::config::{ConfigLayer, FsyncPolicy};
/// let layer = ConfigLayer::from_toml(r#"
///     listen = "127.0.0.1:0"
///     data = "/var/lib/mailroom"
///     fsync = "interval:50"
///     max_payload_bytes = 65536
///     header_read_timeout_ms = 5000
///     cors_origins = ["https://app.example"]
/// "#).unwrap();
/// assert_eq!(layer.fsync, Some(FsyncPolicy::Interval(std::time::Duration::from_millis(50))));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer {
    /// The address to listen on.
    pub listen: Option<SocketAddr>,
    /// The data directory.
    pub data: Option<PathBuf>,
    /// The fsync policy.
    pub fsync: Option<FsyncPolicy>,
    /// The bearer token every `/v1` call must carry.
    pub token: Option<String>,
    /// The largest message body accepted, in bytes.
    pub max_payload_bytes: Option<u64>,
    /// How long a request's head may take to arrive, and an idle keep-alive connection
    /// may wait for the next one, in milliseconds.
    pub header_read_timeout_ms: Option<u64>,
    /// The origins browsers may call from (`--cors-origin`); each entry may itself be a
    /// comma-separated list.
    pub cors_origins: Option<Vec<String>>,
    /// The default age limit of every topic's retention, in milliseconds.
    pub retention_max_age_ms: Option<u64>,
    /// The default size limit of every topic's retention, in bytes.
    pub retention_max_bytes: Option<u64>,
    /// How often the background task applies retention, in milliseconds.
    pub retention_interval_ms: Option<u64>,
    /// The size at which a log starts a new segment, in bytes.
    pub segment_bytes: Option<u64>,
    /// The most topics the store holds (default: sized from the open-file limit).
    pub max_topics: Option<usize>,
    /// The most connections served at once (default: sized from the open-file limit).
    pub max_connections: Option<usize>,
    /// The kernel send buffer of every accepted connection, in bytes.
    pub socket_send_buffer_bytes: Option<usize>,
    /// Where topics and groups are kept: `postgres://...` for a PostgreSQL database that
    /// several brokers may share; unset, the embedded store in `data`.
    pub store: Option<String>,
    /// How many of a topic's newest messages its idempotency window covers.
    pub idempotency_window_messages: Option<u64>,
    /// How long a topic's idempotency window remembers a key, in milliseconds.
    pub idempotency_window_ms: Option<u64>,
}

impl ConfigLayer {
    /// Parses a TOML config file's text.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for bad TOML, unknown keys or badly typed values.
    pub fn from_toml(text: &str) -> Result<ConfigLayer, ConfigError> {
        toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: PathBuf::from("<inline>"),
            source: Box::new(source),
        })
    }

    /// Reads and parses a TOML config file.
    ///
    /// # Errors
    /// [`ConfigError::Read`] or [`ConfigError::Parse`].
    pub fn from_file(path: &Path) -> Result<ConfigLayer, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }
}
