//! Why a backend call fails ([`BackendError`], answered as the API's errors), and the
//! wait of a change on its way to durability ([`Durable`]).

use std::future::Future;
use std::pin::Pin;

use axum::http::StatusCode;
use mailroom_api::ErrorCode;
use mailroom_store::StoreError;

use crate::error::ApiError;

/// A change on its way to durability: resolves with the call's answer once what it
/// wrote is durable (see [`TopicPublisher`](super::TopicPublisher)).
pub type Durable<T> = Pin<Box<dyn Future<Output = Result<T, BackendError>> + Send>>;

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The store refused the call or failed: an unknown topic or group, a delivery not
    /// in flight, an argument out of range, an I/O error, a fail-stop. Answered as the
    /// store's error ([`ApiError`]'s `From<StoreError>`).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The backend itself failed, such as a task of it that panicked: 500 `internal`
    /// with this message.
    #[error("{0}")]
    Internal(String),
    /// The backend cannot reach its store now (a networked backend lost its database
    /// connection): 503 `store_unavailable`. Nothing was confirmed; the backend
    /// reconnects by itself.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// This backend does not support the call yet: 501 `not_supported`, naming it.
    #[error("{0} is not supported by this backend yet")]
    NotSupported(&'static str),
}

impl From<BackendError> for ApiError {
    fn from(error: BackendError) -> ApiError {
        match error {
            BackendError::Store(error) => ApiError::from(error),
            BackendError::Internal(message) => ApiError::internal(message),
            BackendError::Unavailable(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StoreUnavailable,
                error.to_string(),
            ),
            BackendError::NotSupported(_) => ApiError::new(
                StatusCode::NOT_IMPLEMENTED,
                ErrorCode::NotSupported,
                error.to_string(),
            ),
        }
    }
}
