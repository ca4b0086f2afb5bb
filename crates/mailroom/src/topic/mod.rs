//! Topics: a retained, append-only log read by independent consumer groups.
//!
//! (The `Topic<M>` type itself is being written; the shared value types below are the
//! contract that the durable store and the server build on.)

mod types;

pub use crate::group::DeliveryId;
pub use types::{DeadLetter, Delivery, GroupInfo, Nack, StartPosition, TopicError};
