//! Operations: health (metrics and the OpenAPI document are not JSON bodies of their own).

use serde::{Deserialize, Serialize};

/// The answer to `GET /healthz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// Always `ok` while the server is serving.
    pub status: String,
}
