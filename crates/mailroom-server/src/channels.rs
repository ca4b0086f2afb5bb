//! The registry of live channels: one in-memory `Broker<Bytes>` per channel.
//!
//! Channels are not persisted: they exist from `PUT` until `DELETE` or shutdown. Closing
//! a channel closes its broker, so every subscriber's stream ends once it has delivered
//! what was already in that subscriber's mailbox.
//!
//! # Across brokers
//!
//! On a store that several brokers share, the registry has a [`ChannelRelay`]: each
//! message published here is fanned out to this broker's subscribers at once and handed
//! to the relay, which carries it to the other brokers (never waiting); a message the
//! relay brings from another broker is fanned out here by
//! [`Channels::deliver_relayed`] to this broker's channel of that name, if it has one.
//! The publish answer counts this broker's subscribers only.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::Bytes;
use mailroom::broadcast::{Broker, BrokerStats, Delivery};
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

/// What a [`ChannelRelay`] did since the broker started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounts {
    /// Messages published here and sent to the other brokers.
    pub sent: u64,
    /// Messages published here that the other brokers were never sent (the relay could
    /// not keep up, or the database could not be reached).
    pub unsent: u64,
    /// Messages of other brokers received here.
    pub received: u64,
    /// Messages of other brokers that never arrived here (found by gaps in their
    /// numbering: this broker was not listening, or they were never sent).
    pub missed: u64,
}

/// Carries channel messages between the brokers that share a store
/// (`docs/scale-out.md`, "Live channels across brokers").
pub trait ChannelRelay: Send + Sync + std::fmt::Debug {
    /// The largest payload it carries: a larger publish is refused with 413 before
    /// anyone gets it.
    fn payload_bytes_max(&self) -> usize;

    /// Hands `payload`, just published to `channel` here, to the other brokers. Never
    /// waits: a relay that cannot keep up drops it (and counts that).
    fn send(&self, channel: &str, payload: &Bytes);

    /// What it did so far.
    fn counts(&self) -> RelayCounts;
}

/// Every live channel, by name.
#[derive(Debug, Default)]
pub struct Channels {
    channels: RwLock<BTreeMap<String, Arc<Channel>>>,
    /// The other brokers' way to this broker's publishes, on a shared store.
    relay: Option<Arc<dyn ChannelRelay>>,
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
    /// An empty registry whose publishes also go to the other brokers through `relay`.
    pub fn relayed(relay: Arc<dyn ChannelRelay>) -> Channels {
        Channels {
            channels: RwLock::default(),
            relay: Some(relay),
        }
    }

    /// Publishes `payload` to `channel`: to every subscriber here at once and, through
    /// the relay if there is one, to the other brokers' subscribers. Never waits.
    /// Answers this broker's delivered and dropped counts.
    ///
    /// # Errors
    /// 404 `unknown_channel` (also for a channel closed meanwhile); 413
    /// `payload_too_large` past the relay's limit.
    pub fn publish(&self, channel: &str, payload: Bytes) -> Result<Delivery, ApiError> {
        let handle = self.get(channel)?;
        let Some(relay) = &self.relay else {
            return Ok(handle.broker.publish(payload)?);
        };
        let max = relay.payload_bytes_max();
        if payload.len() > max {
            return Err(ApiError::payload_too_large(format!(
                "a channel message is at most {max} bytes on a store shared by brokers \
                 (it travels in a PostgreSQL notification), got {}",
                payload.len()
            )));
        }
        let delivery = handle.broker.publish(payload.clone())?;
        relay.send(channel, &payload);
        Ok(delivery)
    }

    /// What the relay did so far; `None` without one.
    pub fn relay_counts(&self) -> Option<RelayCounts> {
        self.relay.as_ref().map(|relay| relay.counts())
    }

    /// Fans out `payload`, published to `channel` on another broker, to this broker's
    /// subscribers; `None` if this broker has no such channel (or it just closed).
    pub fn deliver_relayed(&self, channel: &str, payload: Bytes) -> Option<Delivery> {
        let handle = self.channels.read().get(channel).cloned()?;
        handle.broker.publish(payload).ok()
    }

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
