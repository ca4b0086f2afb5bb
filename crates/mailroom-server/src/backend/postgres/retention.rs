//! Retention on this backend.

use mailroom_store::TopicRetention;

use super::Postgres;
use crate::backend::{BackendError, RetentionChange, RetentionPass};

impl Postgres {
    pub(super) async fn create_topic_row_with(
        &self,
        topic: &str,
        retention: &TopicRetention,
    ) -> Result<bool, BackendError> {
        if *retention != TopicRetention::default() {
            return Err(BackendError::NotSupported("a topic's own retention"));
        }
        self.create_topic_row(topic).await
    }

    pub(super) async fn change_retention_row(
        &self,
        _topic: &str,
        _change: RetentionChange,
    ) -> Result<(), BackendError> {
        Err(BackendError::NotSupported("changing a topic's retention"))
    }

    pub(super) async fn retention_pass(&self) -> Result<RetentionPass, BackendError> {
        Ok(RetentionPass::default())
    }
}
