//! Removing things: topic and group deletion, durable on the server.

use http::Method;

use crate::{Client, ClientError};

impl Client {
    /// Deletes a topic with its messages and groups, durably.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// client.delete_topic("orders").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `unknown_topic` (404), `invalid_name` (400), or a transport error.
    pub async fn delete_topic(&self, topic: &str) -> Result<(), ClientError> {
        self.send(self.request(Method::DELETE, &Self::topic_path(topic, &[])?))
            .await?;
        Ok(())
    }

    /// Deletes a consumer group, durably; the topic stays.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// client.delete_group("orders", "billing").await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn delete_group(&self, topic: &str, group: &str) -> Result<(), ClientError> {
        let path = Self::group_path(topic, group, &[])?;
        self.send(self.request(Method::DELETE, &path)).await?;
        Ok(())
    }
}
