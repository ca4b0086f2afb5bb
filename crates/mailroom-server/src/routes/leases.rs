//! A group's leases: `touch` extends the lease of a delivery in flight.
//!
//! A lease is set per group (`lease_ms`, see [`crate::routes::groups`]); a delivery whose
//! lease runs out counts as a failure. Polls and acks are in [`crate::routes::deliveries`].

use axum::extract::State;
use axum::Json;
pub use mailroom_api::deliveries::Touched;
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::JsonBody;
use crate::error::{ApiError, ErrorBody};
use crate::paths::GroupPath;
use crate::routes::deliveries::DeliveryRef;
use crate::routes::BodyLimits;
use crate::state::AppState;

/// Extends the lease of the exact delivery in flight to `now + lease_ms`.
#[utoipa::path(post, path = "/v1/topics/{topic}/groups/{group}/touch", tag = "groups",
    params(("topic" = crate::names::Name, Path, description = "Topic name"),
           ("group" = crate::names::Name, Path, description = "Group name")),
    request_body = DeliveryRef,
    responses(
        (status = 200, description = "The lease runs from now again", body = Touched),
        (status = 400, description = "Invalid name or JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 404, description = "Unknown topic or group", body = ErrorBody),
        (status = 409, description = "Not a delivery in flight, or its lease ran out (not_owned)",
            body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
    ))]
pub async fn touch(
    State(state): State<AppState>,
    GroupPath { topic, group }: GroupPath,
    JsonBody(delivery): JsonBody<DeliveryRef>,
) -> Result<Json<Touched>, ApiError> {
    state.backend.touch(&topic, &group, delivery.id()).await?;
    Ok(Json(Touched {
        outcome: "touched".to_owned(),
    }))
}

/// The lease route: touch.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(touch).layer(limits.json))
}
