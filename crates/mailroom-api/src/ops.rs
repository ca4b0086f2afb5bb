//! Operations: health (metrics and the OpenAPI document are not JSON bodies of their own).

use serde::{Deserialize, Serialize};

use crate::topic_health::FailedTopic;

/// The answer to `GET /healthz`: 200 with `{"status": "ok"}` while the server serves
/// and every topic accepts writes; 200 with `{"status": "degraded", "failed_topics":
/// [...]}` while some topics are failed (damaged, unreadable, or stopped after a failed
/// write such as a full disk) and the others serve; 503 with `{"status": "unhealthy",
/// "reason": "..."}` once the whole store is fail-stop.
///
/// Degraded is a 200 on purpose: the server still serves every healthy topic, and a load
/// balancer that took it out of rotation would take those down too. Alert on the status
/// (or on the `mailroom_topics_failed` metric) instead.
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
    /// `ok`, `degraded` while some topics are failed, or `unhealthy` when the whole
    /// store stopped accepting writes.
    pub status: String,
    /// Why the server is unhealthy; absent while it is healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The failed topics, by name, while `status` is `degraded`; absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_topics: Vec<FailedTopic>,
}

impl Health {
    /// The healthy answer.
    pub fn ok() -> Health {
        Health {
            status: "ok".to_owned(),
            reason: None,
            failed_topics: Vec::new(),
        }
    }

    /// The unhealthy answer, saying `reason`.
    pub fn unhealthy(reason: impl Into<String>) -> Health {
        Health {
            status: "unhealthy".to_owned(),
            reason: Some(reason.into()),
            failed_topics: Vec::new(),
        }
    }

    /// The degraded answer: these topics are failed, the others serve.
    pub fn degraded(failed_topics: Vec<FailedTopic>) -> Health {
        Health {
            status: "degraded".to_owned(),
            reason: None,
            failed_topics,
        }
    }
}
