//! Operations: health (metrics and the OpenAPI document are not JSON bodies of their own).

use serde::{Deserialize, Serialize};

/// The answer to `GET /healthz`: 200 with `{"status": "ok"}` while the server serves
/// and its store accepts writes; 503 with `{"status": "unhealthy", "reason": "..."}`
/// once the store is fail-stop (a write or fsync failed; restart the server after
/// fixing the disk).
///
/// ```
/// use mailroom_api::ops::Health;
/// let healthy: Health = serde_json::from_str(r#"{"status":"ok"}"#)?;
/// assert_eq!(healthy, Health::ok());
/// assert_eq!(serde_json::to_string(&healthy)?, r#"{"status":"ok"}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`, or `unhealthy` when the store stopped accepting writes.
    pub status: String,
    /// Why the server is unhealthy; absent while it is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Health {
    /// The healthy answer.
    pub fn ok() -> Health {
        Health {
            status: "ok".to_owned(),
            reason: None,
        }
    }

    /// The unhealthy answer, saying `reason`.
    pub fn unhealthy(reason: impl Into<String>) -> Health {
        Health {
            status: "unhealthy".to_owned(),
            reason: Some(reason.into()),
        }
    }
}
