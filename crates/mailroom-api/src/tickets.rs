//! Stream tickets: how a browser opens an SSE or WebSocket stream on a server that
//! needs a token, without the token in a URL.
//!
//! An authenticated `POST /v1/tickets` with a [`TicketRequest`] answers a [`Ticket`]: a
//! random, single-use string that opens one `GET` under the path prefix it names, passed
//! as `?ticket=...`, within [`Ticket::expires_in_ms`].
//!
//! ```
//! use mailroom_api::tickets::{Ticket, TicketRequest};
//! let request: TicketRequest = serde_json::from_str(r#"{"path": "/v1/channels/news/events"}"#).unwrap();
//! assert_eq!(request.path, "/v1/channels/news/events");
//! let ticket = Ticket { ticket: "3f9c".into(), path: request.path, expires_in_ms: 30_000 };
//! let json = serde_json::to_string(&ticket).unwrap();
//! assert_eq!(json, r#"{"ticket":"3f9c","path":"/v1/channels/news/events","expires_in_ms":30000}"#);
//! ```

use serde::{Deserialize, Serialize};

/// The body of `POST /v1/tickets`: what the ticket may open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TicketRequest {
    /// The path prefix the ticket opens, starting with `/v1/`: the stream's own path
    /// (`/v1/channels/news/events`) or a prefix of whole segments (`/v1/channels/news`).
    pub path: String,
}

/// The answer to `POST /v1/tickets`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Ticket {
    /// The ticket: pass it once as `?ticket=...` on a `GET` under `path`. It is a secret
    /// until used; the server never logs it.
    pub ticket: String,
    /// The path prefix it opens, as requested.
    pub path: String,
    /// How long it stays valid, in milliseconds from now.
    pub expires_in_ms: u64,
}
