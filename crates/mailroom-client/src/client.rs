//! The HTTP client: one method per endpoint of the API.

use base64::Engine as _;
use bytes::Bytes;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};
use url::Url;

use crate::exchange::Answer;
use crate::subscription::{self, SubscribeOptions, Subscription};
use crate::timeouts::Timeouts;
use crate::types::WireDelivery;
use crate::{
    ChannelDelivery, ChannelInfo, ClientError, Delivery, DeliveryId, GroupInfo, NackOutcome,
    StartPosition, TopicInfo, TopicSummary,
};

/// A handle to one mailroom server. Cheap to clone; clones share a connection pool.
///
/// Every method maps to one HTTP call. Errors the server reports come back as
/// [`ClientError::Api`] with the server's stable code. Every call is bounded by the
/// client's [`Timeouts`] ([`Client::with_timeouts`] sets them).
///
/// ```no_run
/// # async fn demo() -> Result<(), mailroom_client::ClientError> {
/// use mailroom_client::{Client, StartPosition};
/// let client = Client::new("http://127.0.0.1:7070")?;
/// client.create_topic("orders").await?;
/// client.create_group("orders", "billing", 3, StartPosition::Earliest).await?;
/// let offset = client.publish("orders", "hello").await?;
/// let delivery = client.poll("orders", "billing").await?.expect("a message is waiting");
/// assert_eq!(delivery.offset, offset);
/// client.ack("orders", "billing", delivery.id()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
    timeouts: Timeouts,
}

impl Client {
    /// A client for the server at `base_url` (for example `http://127.0.0.1:7070`), with
    /// the default [`Timeouts`].
    ///
    /// # Errors
    /// [`ClientError::InvalidUrl`] if `base_url` is not an absolute `http://` URL.
    pub fn new(base_url: &str) -> Result<Client, ClientError> {
        Client::with_timeouts(base_url, Timeouts::default())
    }

    /// A client for the server at `base_url` with explicit time limits.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mailroom_client::{Client, Timeouts};
    /// let quick = Timeouts { connect: Duration::from_millis(500), request: Duration::from_secs(2) };
    /// let client = Client::with_timeouts("http://127.0.0.1:7070", quick)?.with_token("secret");
    /// assert_eq!(client.timeouts().request, Duration::from_secs(2));
    /// # Ok::<(), mailroom_client::ClientError>(())
    /// ```
    ///
    /// # Errors
    /// [`ClientError::InvalidUrl`] if `base_url` is not an absolute `http://` URL;
    /// [`ClientError::Http`] if the HTTP client cannot be set up.
    pub fn with_timeouts(base_url: &str, timeouts: Timeouts) -> Result<Client, ClientError> {
        let base = Url::parse(base_url).map_err(|e| ClientError::InvalidUrl(e.to_string()))?;
        if base.scheme() != "http" || base.cannot_be_a_base() {
            return Err(ClientError::InvalidUrl(format!(
                "{base_url}: expected an http:// URL"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            .build()?;
        Ok(Client {
            http,
            base,
            token: None,
            timeouts,
        })
    }

    /// The client's time limits.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The same client, sending `Authorization: Bearer <token>` on every call.
    pub fn with_token(mut self, token: impl Into<String>) -> Client {
        self.token = Some(token.into());
        self
    }

    /// The server's base URL.
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The URL of `segments` under the base URL, each segment percent-encoded.
    pub(crate) fn url(&self, segments: &[&str]) -> Result<Url, ClientError> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| ClientError::InvalidUrl(self.base.to_string()))?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    pub(crate) fn request(
        &self,
        method: Method,
        segments: &[&str],
    ) -> Result<RequestBuilder, ClientError> {
        let mut request = self.http.request(method, self.url(segments)?);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        Ok(request)
    }

    /// Checks that the server is up (`GET /healthz`).
    ///
    /// # Errors
    /// Any transport error, or an error status.
    pub async fn health(&self) -> Result<(), ClientError> {
        self.send(self.http.get(self.url(&["healthz"])?)).await?;
        Ok(())
    }

    /// Creates a topic. Returns `true` if it was created, `false` if it already existed.
    ///
    /// # Errors
    /// `invalid_name` (400), `unauthorized` (401), or a transport error.
    pub async fn create_topic(&self, topic: &str) -> Result<bool, ClientError> {
        let answer = self
            .send(self.request(Method::PUT, &["v1", "topics", topic])?)
            .await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Lists every topic with its offsets and group names.
    ///
    /// # Errors
    /// `unauthorized` (401), or a transport error.
    pub async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
        #[derive(Deserialize)]
        struct Topics {
            topics: Vec<TopicSummary>,
        }
        let topics: Topics = self
            .json(self.request(Method::GET, &["v1", "topics"])?)
            .await?;
        Ok(topics.topics)
    }

    /// One topic with the state of each of its groups.
    ///
    /// # Errors
    /// `unknown_topic` (404), or a transport error.
    pub async fn topic_info(&self, topic: &str) -> Result<TopicInfo, ClientError> {
        self.json(self.request(Method::GET, &["v1", "topics", topic])?)
            .await
    }

    /// Publishes one message and returns its offset.
    ///
    /// # Errors
    /// `unknown_topic` (404), `payload_too_large` (413), or a transport error.
    pub async fn publish(
        &self,
        topic: &str,
        payload: impl Into<Bytes>,
    ) -> Result<u64, ClientError> {
        #[derive(Deserialize)]
        struct Published {
            offset: u64,
        }
        let request = self
            .request(Method::POST, &["v1", "topics", topic, "messages"])?
            .header("content-type", "application/octet-stream")
            .body(payload.into());
        let published: Published = self.json(request).await?;
        Ok(published.offset)
    }

    /// Publishes several messages in one call and returns their offsets, in order.
    /// Payloads that are not UTF-8 travel as base64.
    ///
    /// # Errors
    /// `unknown_topic` (404), `invalid_argument` (400, empty or oversized batch),
    /// `payload_too_large` (413), or a transport error.
    pub async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Vec<u64>, ClientError> {
        #[derive(Deserialize)]
        struct Published {
            offsets: Vec<u64>,
        }
        let messages: Vec<Value> = payloads
            .iter()
            .map(|payload| match std::str::from_utf8(payload) {
                Ok(text) => Value::String(text.to_owned()),
                Err(_) => {
                    json!({ "base64": base64::engine::general_purpose::STANDARD.encode(payload) })
                }
            })
            .collect();
        let request = self
            .request(Method::POST, &["v1", "topics", topic, "messages", "batch"])?
            .json(&json!({ "messages": messages }));
        let published: Published = self.json(request).await?;
        Ok(published.offsets)
    }

    /// Creates a consumer group on a topic.
    ///
    /// # Errors
    /// `group_exists` (409), `invalid_argument` (400), `unknown_topic` (404), or a
    /// transport error.
    pub async fn create_group(
        &self,
        topic: &str,
        group: &str,
        max_attempts: u32,
        start: StartPosition,
    ) -> Result<(), ClientError> {
        let body = match start {
            StartPosition::Earliest => json!({ "max_attempts": max_attempts, "start": "earliest" }),
            StartPosition::Latest => json!({ "max_attempts": max_attempts, "start": "latest" }),
            StartPosition::Offset(offset) => {
                json!({ "max_attempts": max_attempts, "start": offset })
            }
        };
        let request = self
            .request(Method::PUT, &["v1", "topics", topic, "groups", group])?
            .json(&body);
        self.send(request).await?;
        Ok(())
    }

    /// One group's position, attempt, in-flight delivery, lag and dead-letter count.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn group_info(&self, topic: &str, group: &str) -> Result<GroupInfo, ClientError> {
        self.json(self.request(Method::GET, &["v1", "topics", topic, "groups", group])?)
            .await
    }

    /// Polls a group: the delivery in flight, a new attempt at the next message, or
    /// `None` when the group has finished everything published.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn poll(&self, topic: &str, group: &str) -> Result<Option<Delivery>, ClientError> {
        let request = self.request(
            Method::POST,
            &["v1", "topics", topic, "groups", group, "poll"],
        )?;
        Self::delivery_from(&self.send(request).await?)
    }

    /// Decodes a poll's answer: 204 is nothing waiting, 200 a delivery. Both poll forms
    /// (anonymous and as a consumer) answer alike.
    pub(crate) fn delivery_from(answer: &Answer) -> Result<Option<Delivery>, ClientError> {
        if answer.status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let wire: WireDelivery = Self::decode(answer)?;
        Ok(Some(Delivery {
            offset: wire.offset,
            attempt: wire.attempt,
            payload: wire.payload.into_bytes()?,
        }))
    }

    /// Acknowledges the group's in-flight delivery, moving the group past it.
    ///
    /// # Errors
    /// `not_owned` (409) if `delivery` is not exactly the delivery in flight; 404s for
    /// unknown names; or a transport error.
    pub async fn ack(
        &self,
        topic: &str,
        group: &str,
        delivery: DeliveryId,
    ) -> Result<(), ClientError> {
        let request = self
            .request(
                Method::POST,
                &["v1", "topics", topic, "groups", group, "ack"],
            )?
            .json(&delivery);
        self.send(request).await?;
        Ok(())
    }

    /// Gives up on the group's in-flight delivery: a retry, or a dead letter after the
    /// final attempt.
    ///
    /// # Errors
    /// As for [`Client::ack`].
    pub async fn nack(
        &self,
        topic: &str,
        group: &str,
        delivery: DeliveryId,
    ) -> Result<NackOutcome, ClientError> {
        #[derive(Deserialize)]
        struct Nacked {
            outcome: NackOutcome,
        }
        let request = self
            .request(
                Method::POST,
                &["v1", "topics", topic, "groups", group, "nack"],
            )?
            .json(&delivery);
        let nacked: Nacked = self.json(request).await?;
        Ok(nacked.outcome)
    }

    /// Creates a live channel. Returns `true` if created, `false` if one with the same
    /// settings already existed.
    ///
    /// # Errors
    /// `invalid_argument` (400), `channel_exists` (409, different settings), or a
    /// transport error.
    pub async fn create_channel(
        &self,
        channel: &str,
        max_subscribers: u64,
        mailbox_capacity: u64,
    ) -> Result<bool, ClientError> {
        let body =
            json!({ "max_subscribers": max_subscribers, "mailbox_capacity": mailbox_capacity });
        let request = self
            .request(Method::PUT, &["v1", "channels", channel])?
            .json(&body);
        let answer = self.send(request).await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Every live channel with its counters.
    ///
    /// # Errors
    /// `unauthorized` (401), or a transport error.
    pub async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
        #[derive(Deserialize)]
        struct Channels {
            channels: Vec<ChannelInfo>,
        }
        let channels: Channels = self
            .json(self.request(Method::GET, &["v1", "channels"])?)
            .await?;
        Ok(channels.channels)
    }

    /// Publishes one message to a live channel's current subscribers.
    ///
    /// # Errors
    /// `unknown_channel` (404), `payload_too_large` (413), or a transport error.
    pub async fn publish_channel(
        &self,
        channel: &str,
        payload: impl Into<Bytes>,
    ) -> Result<ChannelDelivery, ClientError> {
        let request = self
            .request(Method::POST, &["v1", "channels", channel, "messages"])?
            .header("content-type", "application/octet-stream")
            .body(payload.into());
        self.json(request).await
    }

    /// Closes a live channel: subscribers get what is queued, then their streams end.
    ///
    /// # Errors
    /// `unknown_channel` (404), or a transport error.
    pub async fn close_channel(&self, channel: &str) -> Result<(), ClientError> {
        self.send(self.request(Method::DELETE, &["v1", "channels", channel])?)
            .await?;
        Ok(())
    }

    /// Subscribes to a live channel over WebSocket.
    ///
    /// # Errors
    /// `subscriber_limit` (409), `unknown_channel` (404), or a transport error.
    pub async fn subscribe(&self, channel: &str) -> Result<Subscription, ClientError> {
        self.subscribe_with(channel, SubscribeOptions::default())
            .await
    }

    /// Subscribes with explicit socket options (see [`SubscribeOptions`]).
    ///
    /// # Errors
    /// As for [`Client::subscribe`].
    pub async fn subscribe_with(
        &self,
        channel: &str,
        options: SubscribeOptions,
    ) -> Result<Subscription, ClientError> {
        subscription::connect(self, channel, options).await
    }

    /// The server's Prometheus metrics, as text.
    ///
    /// # Errors
    /// Any transport error, or an error status.
    pub async fn metrics(&self) -> Result<String, ClientError> {
        let answer = self.send(self.http.get(self.url(&["metrics"])?)).await?;
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves names are percent-encoded into single path segments, so a hostile name can
    // never address a different endpoint.
    #[test]
    fn url_encodes_each_segment() {
        let client = Client::new("http://127.0.0.1:7070/").unwrap();
        let url = client.url(&["v1", "topics", "a/b?c"]).unwrap();
        assert_eq!(url.as_str(), "http://127.0.0.1:7070/v1/topics/a%2Fb%3Fc");
    }

    // Proves only absolute http URLs are accepted as a base.
    #[test]
    fn new_refuses_non_http_urls() {
        assert!(Client::new("https://example.invalid").is_err());
        assert!(Client::new("not a url").is_err());
        assert!(Client::new("http://127.0.0.1:1").is_ok());
    }
}
