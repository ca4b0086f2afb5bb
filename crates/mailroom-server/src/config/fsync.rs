//! The `--fsync` policy: when the store makes writes durable, and how it is written.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;

/// The longest `interval:MS` fsync period accepted: one hour.
pub const FSYNC_INTERVAL_MS_MAX: u64 = 3_600_000;

/// When the store makes writes durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Every confirmed write is on disk before the response is sent.
    #[default]
    Always,
    /// Writes are synced by a background timer; a power cut loses at most one period.
    Interval(Duration),
    /// Only on shutdown; a power cut can lose anything since the start.
    Never,
}

impl FromStr for FsyncPolicy {
    type Err = ConfigError;

    /// Parses `always`, `never` or `interval:MS` (1 ≤ MS ≤ [`FSYNC_INTERVAL_MS_MAX`]).
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::Invalid {
            setting: "fsync",
            reason: format!("{text:?}: {reason} (expected always, never or interval:MS)"),
        };
        match text {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            _ => {
                let millis = text
                    .strip_prefix("interval:")
                    .ok_or_else(|| invalid("unknown policy"))?
                    .parse::<u64>()
                    .map_err(|_| invalid("the interval is not a whole number of milliseconds"))?;
                if millis == 0 || millis > FSYNC_INTERVAL_MS_MAX {
                    return Err(invalid("the interval is out of range"));
                }
                Ok(FsyncPolicy::Interval(Duration::from_millis(millis)))
            }
        }
    }
}

impl fmt::Display for FsyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsyncPolicy::Always => f.write_str("always"),
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Interval(period) => write!(f, "interval:{}", period.as_millis()),
        }
    }
}

impl<'de> Deserialize<'de> for FsyncPolicy {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}
