//! Stream tickets: `POST /v1/tickets` issues a single-use ticket that opens one stream
//! (`EventSource`, `WebSocket`) under a path prefix without the token in the URL; see
//! [`crate::browser`].

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
pub use mailroom_api::tickets::{Ticket, TicketRequest};
use utoipa_axum::router::{OpenApiRouter, UtoipaMethodRouterExt as _};
use utoipa_axum::routes;

use crate::body::JsonBody;
use crate::browser::tickets::TicketError;
use crate::error::{ApiError, ErrorBody, ErrorCode};
use crate::routes::BodyLimits;
use crate::state::AppState;

/// Issues a stream ticket: pass it once as `?ticket=...` on a `GET` under `path`
/// (an SSE or WebSocket subscription) within `expires_in_ms`.
#[utoipa::path(post, path = "/v1/tickets", tag = "tickets",
    request_body = TicketRequest,
    responses(
        (status = 201, description = "Issued", body = Ticket),
        (status = 400, description = "A path not under /v1/, or invalid JSON", body = ErrorBody),
        (status = 401, description = "Missing or wrong token", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 429, description = "Too many tickets outstanding (too_many_tickets)", body = ErrorBody),
        (status = 500, description = "No randomness for a ticket", body = ErrorBody),
    ))]
pub async fn issue_ticket(
    State(state): State<AppState>,
    JsonBody(request): JsonBody<TicketRequest>,
) -> Result<(StatusCode, Json<Ticket>), ApiError> {
    let ticket = state
        .tickets
        .issue(&request.path)
        .map_err(|error| match error {
            TicketError::Full => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::TooManyTickets,
                error.to_string(),
            ),
            TicketError::Random(_) => ApiError::internal(error.to_string()),
            _ => ApiError::invalid_argument(error.to_string()),
        })?;
    let expires_in_ms = u64::try_from(state.tickets.lifetime().as_millis()).unwrap_or(u64::MAX);
    let answer = Ticket {
        ticket,
        path: request.path,
        expires_in_ms,
    };
    Ok((StatusCode::CREATED, Json(answer)))
}

/// The ticket route.
pub fn router(limits: BodyLimits) -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(issue_ticket).layer(limits.json))
}
