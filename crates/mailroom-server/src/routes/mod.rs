//! The HTTP handlers, one file per resource, each with the router of its routes:
//! [`topics`] (with the [`publish_stream`]), [`groups`], [`deliveries`], [`leases`],
//! [`dead_letters`], [`seek_pause`], [`reads`] (the log without a group), [`channels`],
//! [`tickets`] and [`operations`].
//!
//! [`routes`] puts the resources' routers together. It is the one list of the API's
//! routes: the server's router (`crate::app::router`) and the OpenAPI document
//! ([`crate::openapi::document`]) are both built from it, each route with its handler's
//! `#[utoipa::path]`, so a route cannot be served without being documented or the other
//! way round.

use std::fmt;

use axum::extract::DefaultBodyLimit;
use axum::Extension;
use utoipa_axum::router::OpenApiRouter;

use crate::body::{body_limit, BodyLimit, JSON_BODY_BYTES_MAX};
use crate::state::AppState;

pub mod arguments;
mod batch_binary;
mod batch_encode;
pub mod channels;
pub mod consume_stream;
pub mod dead_letters;
pub mod deliveries;
pub mod groups;
pub mod leases;
pub mod metadata;
pub mod operations;
pub mod publish_stream;
pub mod reads;
pub mod seek_pause;
pub mod tickets;
pub mod topic_health;
pub mod topics;

/// The layers that cap one route's body ([`body_limit`]).
pub type BodyLayers = (DefaultBodyLimit, Extension<BodyLimit>);

/// The body caps of the routes, one per kind of body.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// One raw message: the server's payload limit.
    pub payload: BodyLayers,
    /// A JSON batch of messages: [`topics::BATCH_BODY_PAYLOADS_MAX`] payloads.
    pub message_batch: BodyLayers,
    /// A small JSON document ([`JSON_BODY_BYTES_MAX`]).
    pub json: BodyLayers,
    /// A JSON list of deliveries
    /// ([`BATCH_JSON_BODY_BYTES_MAX`](deliveries::batch_arguments::BATCH_JSON_BODY_BYTES_MAX)).
    pub delivery_list: BodyLayers,
}

impl BodyLimits {
    /// The caps for a server whose messages are at most `payload_bytes_max` bytes.
    pub fn new(payload_bytes_max: u64) -> BodyLimits {
        let payload_limit = usize::try_from(payload_bytes_max).unwrap_or(usize::MAX);
        BodyLimits {
            payload: body_limit(payload_limit, "the server's payload limit"),
            message_batch: body_limit(
                payload_limit.saturating_mul(topics::BATCH_BODY_PAYLOADS_MAX),
                "this route's limit",
            ),
            json: body_limit(JSON_BODY_BYTES_MAX, "this route's limit"),
            delivery_list: body_limit(
                deliveries::batch_arguments::BATCH_JSON_BODY_BYTES_MAX,
                "this route's limit",
            ),
        }
    }
}

/// Every route of the API with its OpenAPI description, before the middleware.
pub struct Routes {
    /// The `/v1` routes, which need the token when one is configured.
    pub v1: OpenApiRouter<AppState>,
    /// Health, metrics and the document, open to probes and scrapers.
    pub operations: OpenApiRouter<AppState>,
}

impl fmt::Debug for Routes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paths = |router: &OpenApiRouter<AppState>| {
            let paths = &router.get_openapi().paths.paths;
            paths.keys().cloned().collect::<Vec<_>>()
        };
        f.debug_struct("Routes")
            .field("v1", &paths(&self.v1))
            .field("operations", &paths(&self.operations))
            .finish()
    }
}

/// The [`Routes`] of every resource, with body caps for messages of up to
/// `payload_bytes_max` bytes.
pub fn routes(payload_bytes_max: u64) -> Routes {
    let limits = BodyLimits::new(payload_bytes_max);
    let v1 = OpenApiRouter::new()
        .merge(topics::router(limits))
        .merge(topic_health::router())
        .merge(publish_stream::router())
        .merge(consume_stream::router())
        .merge(groups::router(limits))
        .merge(deliveries::router(limits))
        .merge(leases::router(limits))
        .merge(dead_letters::router(limits))
        .merge(seek_pause::router(limits))
        .merge(channels::router(limits))
        .merge(tickets::router(limits));
    Routes {
        v1,
        operations: operations::router(),
    }
}
