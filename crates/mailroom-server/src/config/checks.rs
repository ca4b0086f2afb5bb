//! The checks a resolved [`Config`] passes before the server starts: each setting within
//! its bounds, and the strings (store URL, token, CORS origins) well formed.

use std::fmt::Display;

use mailroom_store::{IDEMPOTENCY_WINDOW_AGE_MS_MAX, IDEMPOTENCY_WINDOW_MESSAGES_MAX};

use super::{
    Config, ConfigError, CONNECTIONS_MAX_LIMIT, HEADER_READ_TIMEOUT_MS_MAX,
    PAYLOAD_BYTES_MAX_LIMIT, RETENTION_AGE_MS_MAX, RETENTION_BYTES_MAX, RETENTION_INTERVAL_MS_MAX,
    RETENTION_INTERVAL_MS_MIN, SEGMENT_BYTES_MAX, SEGMENT_BYTES_MIN, SOCKET_SEND_BUFFER_BYTES_MAX,
    SOCKET_SEND_BUFFER_BYTES_MIN, TOPICS_MAX_LIMIT,
};

impl Config {
    /// Every check, in the order a bad setting is reported.
    pub(super) fn check_all(&self) -> Result<(), ConfigError> {
        self.check()?;
        self.check_retention()?;
        self.check_limits()
    }

    fn check(&self) -> Result<(), ConfigError> {
        if let Some(store) = &self.store {
            if !(store.starts_with("postgres://") || store.starts_with("postgresql://")) {
                return Err(ConfigError::Invalid {
                    setting: "store",
                    reason: "must be a postgres:// or postgresql:// URL".into(),
                });
            }
        }
        if self.payload_bytes_max == 0 || self.payload_bytes_max > PAYLOAD_BYTES_MAX_LIMIT {
            return Err(ConfigError::Invalid {
                setting: "max-payload-bytes",
                reason: format!(
                    "{} is outside 1..={PAYLOAD_BYTES_MAX_LIMIT}",
                    self.payload_bytes_max
                ),
            });
        }
        if self.header_read_timeout_ms == 0
            || self.header_read_timeout_ms > HEADER_READ_TIMEOUT_MS_MAX
        {
            return Err(ConfigError::Invalid {
                setting: "header-read-timeout-ms",
                reason: format!(
                    "{} is outside 1..={HEADER_READ_TIMEOUT_MS_MAX}",
                    self.header_read_timeout_ms
                ),
            });
        }
        if let Some(token) = &self.token {
            // A token must be sendable in a header; an empty one would be no protection.
            let printable = token.bytes().all(|b| b.is_ascii_graphic());
            if token.is_empty() || !printable {
                return Err(ConfigError::Invalid {
                    setting: "token",
                    reason: "must be non-empty printable ASCII without spaces".into(),
                });
            }
        }
        Ok(())
    }
    fn check_retention(&self) -> Result<(), ConfigError> {
        let bounds = [
            (
                "retention-max-age-ms",
                self.retention_max_age_ms,
                1,
                RETENTION_AGE_MS_MAX,
            ),
            (
                "retention-max-bytes",
                self.retention_max_bytes,
                1,
                RETENTION_BYTES_MAX,
            ),
            (
                "retention-interval-ms",
                Some(self.retention_interval_ms),
                RETENTION_INTERVAL_MS_MIN,
                RETENTION_INTERVAL_MS_MAX,
            ),
            (
                "segment-bytes",
                Some(self.segment_bytes),
                SEGMENT_BYTES_MIN,
                SEGMENT_BYTES_MAX,
            ),
            (
                "idempotency-window-messages",
                Some(self.idempotency_window_messages),
                1,
                IDEMPOTENCY_WINDOW_MESSAGES_MAX,
            ),
            (
                "idempotency-window-ms",
                Some(self.idempotency_window_ms),
                1,
                IDEMPOTENCY_WINDOW_AGE_MS_MAX,
            ),
        ];
        within(bounds)
    }

    fn check_limits(&self) -> Result<(), ConfigError> {
        let bounds = [
            ("max-topics", self.topics_max, 1, TOPICS_MAX_LIMIT),
            (
                "max-connections",
                self.connections_max,
                1,
                CONNECTIONS_MAX_LIMIT,
            ),
            (
                "socket-send-buffer-bytes",
                Some(self.socket_send_buffer_bytes),
                SOCKET_SEND_BUFFER_BYTES_MIN,
                SOCKET_SEND_BUFFER_BYTES_MAX,
            ),
        ];
        within(bounds)
    }
}

/// The first setting (name, value if set, smallest, largest) outside its bounds, as an error.
fn within<T: PartialOrd + Display + Copy>(
    bounds: impl IntoIterator<Item = (&'static str, Option<T>, T, T)>,
) -> Result<(), ConfigError> {
    for (setting, value, min, max) in bounds {
        if let Some(value) = value.filter(|value| !(min..=max).contains(value)) {
            return Err(ConfigError::Invalid {
                setting,
                reason: format!("{value} is outside {min}..={max}"),
            });
        }
    }
    Ok(())
}

/// The `--cors-origin` values, split at commas, checked and normalized, without repeats.
pub(super) fn cors_origins(values: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    let mut origins = Vec::new();
    for value in values.iter().flatten() {
        for text in value.split(',').filter(|text| !text.trim().is_empty()) {
            let origin = crate::browser::origins::parse_origin(text)?;
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
    }
    Ok(origins)
}
