//! Browsers as clients: CORS for the `--cors-origin` list, stream tickets and the
//! WebSocket bearer subprotocol for the browser APIs that cannot send `Authorization`,
//! and the refusal of cross-site writes.
//!
//! The rules (also in the README's "Browsers" section):
//!
//! - **CORS** ([`cors`]): off unless `--cors-origin` lists origins. A listed origin gets
//!   the CORS headers on every route, streams included, and its preflight is answered
//!   204; any other origin gets none.
//! - **Cross-site requests** ([`origins`]): a request that could change something (every
//!   method but `GET`, `HEAD`, `OPTIONS`) or that opens a stream
//!   ([`STREAM_ROUTES`](origins::STREAM_ROUTES), or any WebSocket handshake) is refused
//!   with 403 `forbidden_origin` before its handler runs when its `Origin` is neither
//!   the server's own nor listed, or when it says `Sec-Fetch-Site: cross-site` or
//!   `same-site` without an allowed `Origin`. Without those headers (curl, SDKs) it goes
//!   on.
//! - **Stream authentication** ([`tickets`], [`credentials`]): with `--token`, a `GET`
//!   may present a ticket from `POST /v1/tickets` as `?ticket=` (single use, valid
//!   [`TICKET_LIFETIME_MS`](tickets::TICKET_LIFETIME_MS), only under its path prefix),
//!   and a WebSocket handshake may offer the subprotocols `mailroom.bearer` and
//!   `mailroom.bearer.<token>` (the answer names `mailroom.bearer` only). The ticket is
//!   taken out of the URI before any handler or log sees it; the token never goes in a
//!   URL.

pub mod cors;
pub mod credentials;
pub mod openapi;
pub mod origins;
pub mod tickets;
