//! A Rust client for the mailroom broker's HTTP API.
//!
//! [`Client`] has one async method per endpoint: topics, consumer groups (poll, ack,
//! nack, touch, dead letters, redrive, purge, seek, pause, resume, and the batch forms
//! [`Client::poll_batch`], [`Client::ack_batch`], [`Client::nack_batch`] with long
//! polling) and live channels (publish, and [`Client::subscribe`] over
//! WebSocket). [`Client::publish_stream`] opens a pipelined publishing connection with
//! many messages in flight, each confirmed once durable. Payloads are bytes; the client
//! picks the wire encoding (text when UTF-8, base64 otherwise) and decodes it back, so
//! callers never see it.
//!
//! Errors the server reports arrive as [`ClientError::Api`] with the server's stable
//! [`ErrorCode`], so a caller can tell `not_owned` (someone else's delivery) from
//! `unknown_group` without parsing messages. Topic, group and channel names are checked
//! against the [name rule](mailroom_api::names) before anything is sent: a name such as
//! `..` or `a/b` fails with [`ClientError::InvalidName`] and no request is made.
//!
//! The request and response bodies are the wire format's own types ([`mailroom_api`],
//! re-exported as [`api`]); the client adds only what the wire does not carry as such:
//! payloads decoded to bytes ([`Delivery`], [`DeadLetter`]) and option structs.
//!
//! Every call is bounded in time ([`Timeouts`]: 5 s to connect and 30 s per request by
//! default, a long poll's wait added on top); a server that never answers makes the
//! call fail with [`ClientError::Timeout`], which names the limit that ran out.
//!
//! The client speaks plain `http://` only; put a TLS-terminating proxy in front of the
//! server if the network is not trusted.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mailroom_client::ClientError> {
//! let client = mailroom_client::Client::new("http://127.0.0.1:7070")?.with_token("secret");
//! client.create_channel("drivers", 16, 64).await?;
//! let mut subscription = client.subscribe("drivers").await?;
//! client.publish_channel("drivers", r#"{"driver":7,"lat":52.5,"lon":13.4}"#).await?;
//! let message = subscription.next().await.expect("not closed")?;
//! assert!(message.starts_with(b"{"));
//! # Ok(()) }
//! ```

mod batch;
mod batch_body;
mod call;
mod client;
mod consume_stream;
mod dead_letters;
mod deletion;
mod deliveries;
mod error;
mod exchange;
mod groups;
mod healing;
mod messages;
mod publish_stream;
mod reads;
mod retention;
mod seek_pause;
mod subscription;
mod timeouts;
mod types;

pub use batch::{BatchNack, BatchPoll, SettledPoll};
pub use batch_body::BatchEncoding;
pub use client::Client;
pub use consume_stream::{ConsumeStream, Settled, SettledOutcome, StreamEvent};
pub use dead_letters::{DeadLetterPage, DEAD_LETTERS_PAGE_MAX};
pub use deliveries::NackOptions;
pub use error::{ClientError, HttpError, TimeoutLimit};
pub use groups::GroupOptions;
pub use messages::NewMessage;
pub use publish_stream::{Confirmation, PublishStream, PUBLISH_WINDOW_DEFAULT, PUBLISH_WINDOW_MAX};
pub use reads::{LogMessage, LogPage, ReadFrom, READ_PAGE_DEFAULT, READ_PAGE_MAX};
pub use subscription::{SubscribeOptions, Subscription};
pub use timeouts::{Timeouts, CONNECT_TIMEOUT_DEFAULT, REQUEST_TIMEOUT_DEFAULT};
pub use types::{DeadLetter, Delivery, StartPosition};

/// The wire format this client speaks, for the bodies and limits not re-exported below.
pub use mailroom_api as api;
pub use mailroom_api::batch::BatchItemError;
pub use mailroom_api::channels::{ChannelDelivery, ChannelInfo, CreateChannel};
pub use mailroom_api::deliveries::{DeliveryId, NackKind, NackOutcome};
pub use mailroom_api::groups::{
    Backoff, DeadLetterNote, GroupCounters, GroupDetail, GroupInfo, GroupPause, InFlightDelivery,
};
pub use mailroom_api::publish_stream::StreamError as Refusal;
pub use mailroom_api::topic_health::TopicRepairReport;
pub use mailroom_api::topics::{
    IdempotencyInForce, IdempotencySettings, RetentionInForce, RetentionRemoved, RetentionSettings,
    TopicInfo, TopicSummary,
};
pub use mailroom_api::{ErrorCode, InvalidName, NameError, NameKind};
