//! The mailroom server: the durable store and live channels over HTTP/JSON, WebSocket
//! and Server-Sent Events.
//!
//! # The API
//!
//! - **Topics** (`/v1/topics/...`): durable, retained logs. Publish raw bytes or JSON
//!   batches; consumer groups poll, ack and nack with exact `(offset, attempt)` fencing;
//!   a message nacked on its final attempt is dead-lettered once. Groups also have
//!   (`docs/semantics.md`; [`routes::groups`], [`routes::leases`],
//!   [`routes::dead_letters`]): per-group leases (`touch` extends one), backoff and
//!   `max_in_flight` W with consumer identities on poll; nack kinds
//!   `nack`/`release`/`reject` with a delay and a reason; dead letters with reasons,
//!   redriven to one group or purged.
//! - **Live channels** (`/v1/channels/...`): best-effort fan-out to WebSocket and SSE
//!   subscribers, each with a bounded mailbox; a slow subscriber drops messages (counted)
//!   and never slows the publisher or the others.
//! - **Retention** ([`retention`]): each topic's limits by age, bytes and count (its
//!   own, set by `PUT`/`PATCH /v1/topics/{topic}`, over the server's defaults), applied
//!   by a background task; never past the lowest group position unless the topic says
//!   so.
//! - **Operations**: `/healthz`, `/metrics` (Prometheus), `/openapi.json`.
//! - **Connections** ([`connections`]): HTTP/1.1; a request head that does not arrive
//!   within the configured header read timeout, or a keep-alive connection idle that
//!   long, is closed; a handler that panics answers 500 `internal` on a connection that
//!   stays open.
//!
//! Every error is JSON `{"error": "<stable code>", "message": "..."}`; see [`error`].
//! When a token is configured every `/v1` call needs `Authorization: Bearer <token>`
//! (a browser stream may use a ticket or the WebSocket subprotocol instead; see
//! [`browser`], which also holds the CORS and cross-site rules).
//!
//! Handlers reach the topics and groups only through one trait, [`backend::Backend`];
//! the embedded store implements it ([`backend::Embedded`]). Under `--fsync always` its
//! store calls wait for fsync, so it runs them on the blocking pool; under the relaxed
//! policies they run inline on the async workers ([`backend::Embedded::blocking`] says
//! why).
//!
//! # Example
//!
//! The router runs in-process over any store, which is how to embed the API:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use mailroom_server::{app::router, server::store_options, state::AppState, Config};
//! use tower::ServiceExt as _;
//!
//! let dir = tempfile::tempdir()?;
//! let config = Config::default();
//! let store = mailroom_store::Store::open(dir.path(), store_options(&config))?;
//! let app = router(AppState::new(store, config));
//!
//! let create = Request::put("/v1/topics/orders").body(Body::empty())?;
//! assert_eq!(app.clone().oneshot(create).await?.status(), StatusCode::CREATED);
//! let publish = Request::post("/v1/topics/orders/messages").body(Body::from("hello"))?;
//! assert_eq!(app.oneshot(publish).await?.status(), StatusCode::CREATED);
//! # Ok(()) }
//! ```
//!
//! Serving it, as `mailroom serve` does:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use mailroom_server::{config::Config, server::{shutdown_signal, Server}};
//! let config = Config { listen: "127.0.0.1:0".parse()?, ..Config::default() };
//! let server = Server::start(config).await?;
//! println!("listening on {}", server.local_addr()?);
//! server.serve(shutdown_signal()).await?;
//! # Ok(()) }
//! ```

pub mod app;
pub mod backend;
pub mod body;
pub mod browser;
pub mod channels;
pub mod config;
pub mod connections;
pub mod console;
pub mod error;
pub mod limits;
pub mod listener;
pub mod long_poll;
pub mod metrics;
pub mod names;
pub mod openapi;
pub mod paths;
pub mod retention;
pub mod routes;
pub mod server;
pub mod state;
pub mod topic_healing;
pub mod websocket;

pub use config::Config;
pub use server::{Server, ServerError};
