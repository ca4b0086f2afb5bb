//! The registry of live channels: one in-memory `Broker<Bytes>` per channel.
//!
//! Channels are not persisted: they exist from `PUT` until `DELETE` or shutdown. Closing
//! a channel closes its broker, so every subscriber's stream ends once it has delivered
//! what was already in that subscriber's mailbox.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::Bytes;
use mailroom::broadcast::{Broker, BrokerStats};
use parking_lot::RwLock;

use crate::error::{ApiError, ErrorCode};

// The channel limits are part of the wire format: clients see them in every refusal.
pub use mailroom_api::limits::{
    CHANNELS_MAX, CHANNEL_MAILBOX_BYTES_MAX, CHANNEL_MAILBOX_CAPACITY_MAX, CHANNEL_SUBSCRIBERS_MAX,
};

/// A channel's limits: subscribers, and each subscriber's mailbox by count and bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChannelLimits {
    /// The most subscribers at once.
    pub max_subscribers: usize,
    /// The most messages buffered per subscriber.
    pub mailbox_capacity: usize,
    /// The most payload bytes buffered per subscriber.
    pub mailbox_bytes: usize,
}

/// One live channel.
#[derive(Debug)]
pub struct Channel {
    /// The channel's name.
    pub name: String,
    /// The fan-out itself.
    pub broker: Broker<Bytes>,
}

impl Channel {
    /// The broker's counters.
    pub fn stats(&self) -> BrokerStats {
        self.broker.stats()
    }

    /// The channel's limits.
    pub fn limits(&self) -> ChannelLimits {
        ChannelLimits {
            max_subscribers: self.broker.max_subscribers(),
            mailbox_capacity: self.broker.mailbox_capacity(),
            mailbox_bytes: self.broker.mailbox_bytes(),
        }
    }
}

/// Every live channel, by name.
#[derive(Debug, Default)]
pub struct Channels {
    channels: RwLock<BTreeMap<String, Arc<Channel>>>,
}

/// Whether [`Channels::create`] made a new channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// A new channel.
    New,
    /// One with the same settings already existed.
    Existing,
}

impl Channels {
    /// Creates a channel, or confirms an identical one exists.
    ///
    /// # Errors
    /// 400 `invalid_argument` for limits outside `1..=max`; 409 `channel_exists` for a
    /// channel of that name with other limits; 409 `channel_limit` at [`CHANNELS_MAX`].
    pub fn create(&self, name: &str, limits: ChannelLimits) -> Result<Created, ApiError> {
        let ChannelLimits {
            max_subscribers,
            mailbox_capacity,
            mailbox_bytes,
        } = limits;
        check_limit("max_subscribers", max_subscribers, CHANNEL_SUBSCRIBERS_MAX)?;
        check_limit(
            "mailbox_capacity",
            mailbox_capacity,
            CHANNEL_MAILBOX_CAPACITY_MAX,
        )?;
        check_limit("mailbox_bytes", mailbox_bytes, CHANNEL_MAILBOX_BYTES_MAX)?;
        let mut channels = self.channels.write();
        if let Some(existing) = channels.get(name) {
            let found = existing.limits();
            if found == limits {
                return Ok(Created::Existing);
            }
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::ChannelExists,
                format!(
                    "channel {name:?} exists with max_subscribers {}, mailbox_capacity {} \
                     and mailbox_bytes {}",
                    found.max_subscribers, found.mailbox_capacity, found.mailbox_bytes
                ),
            ));
        }
        if channels.len() >= CHANNELS_MAX {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::ChannelLimit,
                format!("{CHANNELS_MAX} channels exist already, the server's limit"),
            ));
        }
        let broker = Broker::with_mailbox_bytes(
            max_subscribers,
            mailbox_capacity,
            mailbox_bytes,
            Bytes::len,
        )?;
        channels.insert(
            name.to_owned(),
            Arc::new(Channel {
                name: name.to_owned(),
                broker,
            }),
        );
        Ok(Created::New)
    }

    /// The channel of that name.
    ///
    /// # Errors
    /// 404 `unknown_channel`.
    pub fn get(&self, name: &str) -> Result<Arc<Channel>, ApiError> {
        self.channels
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| ApiError::unknown_channel(name))
    }

    /// Every channel, sorted by name.
    pub fn list(&self) -> Vec<Arc<Channel>> {
        self.channels.read().values().cloned().collect()
    }

    /// Removes and closes a channel.
    ///
    /// # Errors
    /// 404 `unknown_channel`.
    pub fn close(&self, name: &str) -> Result<(), ApiError> {
        let removed = self.channels.write().remove(name);
        let channel = removed.ok_or_else(|| ApiError::unknown_channel(name))?;
        channel.broker.close();
        Ok(())
    }

    /// Closes every channel, so that streaming responses end and shutdown can finish.
    pub fn close_all(&self) {
        let drained = std::mem::take(&mut *self.channels.write());
        for channel in drained.values() {
            channel.broker.close();
        }
    }
}

fn check_limit(name: &str, value: usize, max: usize) -> Result<(), ApiError> {
    if value == 0 || value > max {
        return Err(ApiError::invalid_argument(format!(
            "{name} must be in 1..={max}, got {value}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves create is idempotent for equal settings, conflicts for different ones, and
    // that close removes the channel and ends its subscriptions.
    #[test]
    fn create_get_close() {
        let channels = Channels::default();
        let limits = |max_subscribers, mailbox_capacity| ChannelLimits {
            max_subscribers,
            mailbox_capacity,
            mailbox_bytes: 1024,
        };
        assert_eq!(channels.create("c", limits(2, 4)).unwrap(), Created::New);
        assert_eq!(
            channels.create("c", limits(2, 4)).unwrap(),
            Created::Existing
        );
        assert_eq!(
            channels.create("c", limits(3, 4)).unwrap_err().code,
            "channel_exists"
        );
        let other_bytes = ChannelLimits {
            mailbox_bytes: 2048,
            ..limits(2, 4)
        };
        let error = channels.create("c", other_bytes).unwrap_err();
        assert_eq!(error.code, "channel_exists");
        assert!(
            error.message.contains("mailbox_bytes 1024"),
            "{}",
            error.message
        );
        assert_eq!(
            channels.create("d", limits(0, 4)).unwrap_err().code,
            "invalid_argument"
        );
        assert_eq!(
            channels
                .create("d", limits(1, CHANNEL_MAILBOX_CAPACITY_MAX + 1))
                .unwrap_err()
                .code,
            "invalid_argument"
        );
        let too_heavy = ChannelLimits {
            mailbox_bytes: CHANNEL_MAILBOX_BYTES_MAX + 1,
            ..limits(1, 1)
        };
        let error = channels.create("d", too_heavy).unwrap_err();
        assert!(error.message.contains("mailbox_bytes"), "{}", error.message);
        let channel = channels.get("c").unwrap();
        let subscription = channel.broker.subscribe().unwrap();
        channels.close("c").unwrap();
        assert!(subscription.is_closed());
        assert_eq!(channels.get("c").unwrap_err().code, "unknown_channel");
        assert_eq!(channels.close("c").unwrap_err().code, "unknown_channel");
    }
}
