//! The wire format of the mailroom broker, written once: the JSON request and response
//! bodies of every HTTP endpoint, the error codes, the name rule, and the limits the API
//! exposes. The server, the client and the OpenAPI document all use these types, so
//! they cannot drift apart.
//!
//! No I/O and no runtime: only serde types and plain functions.
//!
//! # Modules
//!
//! One per resource: [`topics`], [`groups`], [`deliveries`] (one at a time) and
//! [`batch`] (many at a time; [`batch_binary`] is the batch publish without JSON), [`dead_letters`], [`channels`], [`publish_stream`],
//! [`tickets`] (how a browser opens a stream), [`reads`] (the log without a group), [`ops`]; and what they share: [`metadata_block`] (a message's key and headers as the store and the binary batch both lay them out), [`error`] (every error is `{"error": "<code>",
//! "message": "..."}` with a stable [`ErrorCode`]), [`names`], [`limits`], [`whole`].
//!
//! # Features
//!
//! - `openapi`: derives `utoipa::ToSchema` (and `IntoParams` for query strings) on every
//!   body, for the server's OpenAPI document. A client leaves it out.
//! - `core`: `From` conversions between the bodies and the state machine's types
//!   (`mailroom`), and compile-time checks that [`limits`] agree with it.
//!
//! # Example
//!
//! ```
//! use mailroom_api::deliveries::{DeliveryId, NackKind, NackRequest};
//! let nack = NackRequest {
//!     offset: 4,
//!     attempt: 2,
//!     kind: NackKind::Release,
//!     delay_ms: None,
//!     reason: None,
//! };
//! let json = serde_json::to_string(&nack).unwrap();
//! assert_eq!(json, r#"{"offset":4,"attempt":2,"kind":"release"}"#);
//! // Integers may come as whole-number floats, as JSON Schema allows.
//! let id: DeliveryId = serde_json::from_str(r#"{"offset": 4.0, "attempt": 2}"#).unwrap();
//! assert_eq!(id, DeliveryId { offset: 4, attempt: 2 });
//! ```

pub mod batch;
pub mod batch_binary;
pub mod batch_item;
pub mod batch_scan;
pub mod channels;
pub mod consume_stream;
pub mod dead_letters;
pub mod deliveries;
mod delivery_json;
pub mod error;
pub mod groups;
mod json_text;
pub mod limits;
mod message_body;
pub mod metadata_block;
pub mod names;
pub mod object;
pub mod ops;
pub mod publish_stream;
pub mod reads;
pub mod tickets;
pub mod topic_health;
pub mod topics;
pub mod whole;

pub use error::{ErrorBody, ErrorCode};
pub use names::{check_name, InvalidName, NameError, NameKind, NAME_BYTES_MAX};
