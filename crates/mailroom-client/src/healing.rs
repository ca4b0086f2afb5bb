//! Healing failed topics: reopen a stopped or unreadable one, repair a damaged one
//! (`mailroom_api::topic_health`).

use http::Method;
use mailroom_api::topic_health::{TopicRecovered, TopicRepairReport};

use crate::{Client, ClientError};

impl Client {
    /// Reopens failed `topic` from what is durable (after a full disk, or a file that
    /// could not be read, once fixed); `true` if it was failed and serves again. The
    /// server also retries this by itself.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let recovered = client.recover_topic("orders").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `unknown_topic` (404), `topic_failed` (503) while it still cannot open, or a
    /// transport error.
    pub async fn recover_topic(&self, topic: &str) -> Result<bool, ClientError> {
        let path = Self::topic_path(topic, &["recover"])?;
        let answer: TopicRecovered = self.json(self.request(Method::POST, &path)).await?;
        Ok(answer.recovered)
    }

    /// Repairs damaged `topic`: the server moves each damaged file aside and reopens it,
    /// never handing out a confirmed offset again. `repaired` is `false` for a topic
    /// that was not damaged.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let report = client.repair_topic("orders").await?;
    /// for action in &report.actions {
    ///     println!("{action}");
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `unknown_topic` (404), `topic_failed` (503) if it still cannot open, or a
    /// transport error.
    pub async fn repair_topic(&self, topic: &str) -> Result<TopicRepairReport, ClientError> {
        let path = Self::topic_path(topic, &["repair"])?;
        self.json(self.request(Method::POST, &path)).await
    }
}
