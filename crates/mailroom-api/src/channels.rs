//! Live channels: create, list, describe, publish, close.

use serde::{Deserialize, Serialize};

/// The body of `PUT /v1/channels/{channel}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateChannel {
    /// The most subscribers at once, 1 to 10,000 (default 64).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10_000))]
    pub max_subscribers: Option<usize>,
    /// The most messages buffered per subscriber, 1 to 65,536 (default 256).
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65_536))]
    pub mailbox_capacity: Option<usize>,
    /// The most payload bytes buffered per subscriber, 1 to 67,108,864 (64 MiB; default
    /// 8 MiB). A message that would pass it is dropped for that subscriber, as at a full
    /// mailbox; an empty mailbox takes one message however large.
    #[serde(
        default,
        deserialize_with = "crate::whole::deserialize_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 67_108_864))]
    pub mailbox_bytes: Option<usize>,
}

/// A channel's settings and counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelInfo {
    /// The channel's name.
    pub name: String,
    /// The most subscribers at once.
    pub max_subscribers: u64,
    /// The most messages buffered per subscriber.
    pub mailbox_capacity: u64,
    /// The most payload bytes buffered per subscriber (0 from a server that predates
    /// the byte budget).
    #[serde(default)]
    pub mailbox_bytes: u64,
    /// Subscribers connected now.
    pub subscribers: u64,
    /// Messages published.
    pub published: u64,
    /// Deliveries into mailboxes.
    pub delivered: u64,
    /// Deliveries dropped at full mailboxes.
    pub dropped: u64,
}

/// The answer to `GET /v1/channels`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelList {
    /// Every live channel, sorted by name.
    pub channels: Vec<ChannelInfo>,
}

/// What one channel publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelDelivery {
    /// Subscribers whose mailbox took the message.
    pub delivered: u64,
    /// Subscribers whose mailbox was full: the message was dropped for them.
    pub dropped: u64,
}

/// The answer to a channel deletion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelClosed {
    /// The closed channel.
    pub channel: String,
    /// Always `true`.
    pub closed: bool,
}
