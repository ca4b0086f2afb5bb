//! A topic's retention: creating a topic with its own limits (and its own idempotency
//! window), and changing them.
//!
//! Limits are [`RetentionSettings`]: each absent (at creation the server's default; in
//! a change, unchanged), `Some(None)` (unlimited) or `Some(Some(n))`.

use http::{Method, StatusCode};
use mailroom_api::topics::{IdempotencySettings, TopicCreateRequest, TopicUpdateRequest};

use crate::{Client, ClientError, RetentionSettings, TopicInfo};

impl Client {
    /// Creates a topic with its own retention; `false` if it already existed (its
    /// retention is then left as it is: change it with
    /// [`change_retention`](Self::change_retention)).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::RetentionSettings;
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let week = RetentionSettings { max_age_ms: Some(Some(7 * 86_400_000)), ..Default::default() };
    /// client.create_topic_with("orders", &week).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_name` or `invalid_argument` (400: a limit out of range, named),
    /// `unauthorized` (401), or a transport error.
    pub async fn create_topic_with(
        &self,
        topic: &str,
        retention: &RetentionSettings,
    ) -> Result<bool, ClientError> {
        let body = TopicCreateRequest {
            retention: Some(*retention),
            idempotency: None,
        };
        self.put_topic(topic, &body).await
    }

    /// Creates a topic with its own retention and idempotency window (absent limits
    /// follow the server's defaults); `false` if it already existed (nothing is then
    /// changed). The window in force shows in [`TopicInfo::idempotency`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{IdempotencySettings, RetentionSettings};
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let hour = IdempotencySettings { window_ms: Some(3_600_000), window_messages: None };
    /// client.create_topic_with_window("payments", &RetentionSettings::default(), &hour).await?;
    /// let window = client.topic_info("payments").await?.idempotency.unwrap();
    /// assert_eq!(window.window_ms, 3_600_000);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_name` or `invalid_argument` (400: a limit out of range, named),
    /// `not_supported` (501: a backend that keeps no window of a topic's own),
    /// `unauthorized` (401), or a transport error.
    pub async fn create_topic_with_window(
        &self,
        topic: &str,
        retention: &RetentionSettings,
        window: &IdempotencySettings,
    ) -> Result<bool, ClientError> {
        let body = TopicCreateRequest {
            retention: Some(*retention),
            idempotency: Some(*window),
        };
        self.put_topic(topic, &body).await
    }

    /// `PUT /v1/topics/{topic}` with `body`: `true` if it created the topic.
    async fn put_topic(&self, topic: &str, body: &TopicCreateRequest) -> Result<bool, ClientError> {
        let call = self
            .request(Method::PUT, &Self::topic_path(topic, &[])?)
            .json(body);
        let answer = self.send(call).await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Changes the limits of a topic's retention that `change` gives (absent ones stay
    /// as they are), durably; answers the topic as it is now.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::RetentionSettings;
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let unlimited_age = RetentionSettings { max_age_ms: Some(None), ..Default::default() };
    /// let topic = client.change_retention("orders", &unlimited_age).await?;
    /// assert_eq!(topic.retention.max_age_ms, None);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` (400), `unknown_topic` (404), `unauthorized` (401), or a
    /// transport error.
    pub async fn change_retention(
        &self,
        topic: &str,
        change: &RetentionSettings,
    ) -> Result<TopicInfo, ClientError> {
        let body = TopicUpdateRequest { retention: *change };
        let call = self
            .request(Method::PATCH, &Self::topic_path(topic, &[])?)
            .json(&body);
        self.json(call).await
    }
}
