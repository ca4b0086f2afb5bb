//! The HTTP client: its handle and the calls on topics and live channels. The paths and
//! their name checks are in `client/paths.rs`; groups, deliveries, batches and dead
//! letters have their own files.

use bytes::Bytes;
use http::uri::Authority;
use http::{Method, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mailroom_api::channels::{ChannelList, CreateChannel};
use mailroom_api::topics::TopicList;
use mailroom_api::topics::{BatchPublished, Published};
use url::Url;

use crate::call::Call;

mod paths;

use crate::subscription::{self, SubscribeOptions, Subscription};
use crate::timeouts::Timeouts;
use crate::{BatchEncoding, ChannelDelivery, ChannelInfo, ClientError, TopicInfo, TopicSummary};
use paths::authority_of;

/// hyper's pooled HTTP/1.1 client, which every call goes over.
type Pool = hyper_util::client::legacy::Client<HttpConnector, Full<Bytes>>;

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
    http: Pool,
    base: Url,
    /// The base URL's host and port (the port only if not the default), which every
    /// call's URI carries: parsed once here, not once a call.
    authority: Authority,
    /// The base URL's path without its trailing `/`, which every call's path extends.
    base_path: String,
    token: Option<String>,
    timeouts: Timeouts,
    /// How batch publishes are written (see `batch_body.rs`).
    pub(crate) batch_encoding: BatchEncoding,
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
    /// [`ClientError::InvalidUrl`] if `base_url` is not an absolute `http://` URL.
    pub fn with_timeouts(base_url: &str, timeouts: Timeouts) -> Result<Client, ClientError> {
        let base = Url::parse(base_url).map_err(|e| ClientError::InvalidUrl(e.to_string()))?;
        if base.scheme() != "http" || base.cannot_be_a_base() {
            return Err(ClientError::InvalidUrl(format!(
                "{base_url}: expected an http:// URL"
            )));
        }
        let authority = authority_of(&base)?;
        let base_path = base
            .path()
            .strip_suffix('/')
            .unwrap_or(base.path())
            .to_owned();
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeouts.connect));
        // One request waits for its answer before the next: Nagle would hold a request's
        // last segment back for the previous answer's ACK.
        connector.set_nodelay(true);
        let http =
            hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        Ok(Client {
            http,
            base,
            authority,
            base_path,
            token: None,
            timeouts,
            batch_encoding: BatchEncoding::default(),
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

    /// The request `method` of `segments`, with the token if the client has one.
    pub(crate) fn request(&self, method: Method, segments: &[&str]) -> Call {
        let call = Call::new(method, self.path(segments));
        match &self.token {
            Some(token) => call.bearer_auth(token),
            None => call,
        }
    }

    /// The pooled HTTP connections the calls go over.
    pub(crate) fn http(&self) -> &Pool {
        &self.http
    }

    /// The authority every call's URI carries.
    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }

    /// Checks that the server is up (`GET /healthz`).
    ///
    /// # Errors
    /// Any transport error, or an error status.
    pub async fn health(&self) -> Result<(), ClientError> {
        self.send(Call::new(Method::GET, self.path(&["healthz"])))
            .await?;
        Ok(())
    }

    /// Creates a topic. Returns `true` if it was created, `false` if it already existed.
    ///
    /// # Errors
    /// `invalid_name` (400), `unauthorized` (401), or a transport error.
    pub async fn create_topic(&self, topic: &str) -> Result<bool, ClientError> {
        let answer = self
            .send(self.request(Method::PUT, &Self::topic_path(topic, &[])?))
            .await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Lists every topic with its offsets and group names.
    ///
    /// # Errors
    /// `unauthorized` (401), or a transport error.
    pub async fn list_topics(&self) -> Result<Vec<TopicSummary>, ClientError> {
        let topics: TopicList = self
            .json(self.request(Method::GET, &["v1", "topics"]))
            .await?;
        Ok(topics.topics)
    }

    /// One topic with the state of each of its groups.
    ///
    /// # Errors
    /// `unknown_topic` (404), or a transport error.
    pub async fn topic_info(&self, topic: &str) -> Result<TopicInfo, ClientError> {
        self.json(self.request(Method::GET, &Self::topic_path(topic, &[])?))
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
        let request = self
            .request(Method::POST, &Self::topic_path(topic, &["messages"])?)
            .body("application/octet-stream", payload.into());
        let published: Published = self.json(request).await?;
        Ok(published.offset)
    }

    /// Publishes several messages in one call and returns their offsets, in order,
    /// written in the client's [`BatchEncoding`](crate::BatchEncoding) (under JSON,
    /// payloads that are not UTF-8 travel as base64).
    ///
    /// # Errors
    /// `unknown_topic` (404), `invalid_argument` (400, empty or oversized batch),
    /// `payload_too_large` (413), or a transport error.
    pub async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Vec<u64>, ClientError> {
        let request = self.bare_batch_publish(topic, payloads)?;
        let published: BatchPublished = self.json(request).await?;
        Ok(published.offsets)
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
        // A value beyond `usize` is beyond every limit too; the server says which.
        let body = CreateChannel {
            max_subscribers: Some(usize::try_from(max_subscribers).unwrap_or(usize::MAX)),
            mailbox_capacity: Some(usize::try_from(mailbox_capacity).unwrap_or(usize::MAX)),
            mailbox_bytes: None,
        };
        self.create_channel_with(channel, &body).await
    }

    /// Creates a live channel with any of its settings (those left `None` get the
    /// server's defaults), the byte budget of each mailbox (`mailbox_bytes`) included.
    /// Returns `true` if created, `false` if one with the same settings already existed.
    ///
    /// # Errors
    /// As [`create_channel`](Self::create_channel).
    pub async fn create_channel_with(
        &self,
        channel: &str,
        settings: &CreateChannel,
    ) -> Result<bool, ClientError> {
        let request = self
            .request(Method::PUT, &Self::channel_path(channel, &[])?)
            .json(settings);
        let answer = self.send(request).await?;
        Ok(answer.status == StatusCode::CREATED)
    }

    /// Every live channel with its counters.
    ///
    /// # Errors
    /// `unauthorized` (401), or a transport error.
    pub async fn list_channels(&self) -> Result<Vec<ChannelInfo>, ClientError> {
        let channels: ChannelList = self
            .json(self.request(Method::GET, &["v1", "channels"]))
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
            .request(Method::POST, &Self::channel_path(channel, &["messages"])?)
            .body("application/octet-stream", payload.into());
        self.json(request).await
    }

    /// Closes a live channel: subscribers get what is queued, then their streams end.
    ///
    /// # Errors
    /// `unknown_channel` (404), or a transport error.
    pub async fn close_channel(&self, channel: &str) -> Result<(), ClientError> {
        self.send(self.request(Method::DELETE, &Self::channel_path(channel, &[])?))
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
        let answer = self
            .send(Call::new(Method::GET, self.path(&["metrics"])))
            .await?;
        Ok(String::from_utf8_lossy(&answer.body).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    // Proves only absolute http URLs are accepted as a base.
    #[test]
    fn new_refuses_non_http_urls() {
        assert!(Client::new("https://example.invalid").is_err());
        assert!(Client::new("not a url").is_err());
        assert!(Client::new("http://127.0.0.1:1").is_ok());
    }

    // Proves a name that breaks the rule fails with a typed error before anything is
    // sent: the listener behind the client never sees a connection.
    #[tokio::test]
    async fn bad_names_fail_before_any_request() {
        use crate::{DeliveryId, InvalidName, NameError, NameKind, StartPosition};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = Client::new(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let refused = |result: Result<(), ClientError>, kind, reason| match result {
            Err(ClientError::InvalidName(InvalidName {
                kind: got_kind,
                reason: got_reason,
                ..
            })) => assert_eq!((got_kind, got_reason), (kind, reason)),
            other => panic!("expected an invalid {kind} name, got {other:?}"),
        };
        let id = DeliveryId {
            offset: 0,
            attempt: 1,
        };
        refused(
            client.create_topic("..").await.map(drop),
            NameKind::Topic,
            NameError::Reserved,
        );
        refused(
            client.publish("a/b", "x").await.map(drop),
            NameKind::Topic,
            NameError::Characters,
        );
        refused(
            client
                .create_group("orders", "", 3, StartPosition::Earliest)
                .await,
            NameKind::Group,
            NameError::Empty,
        );
        refused(
            client.ack("orders", "a/b", id).await,
            NameKind::Group,
            NameError::Characters,
        );
        refused(
            client.poll_as("..", "g", "w").await.map(drop),
            NameKind::Topic,
            NameError::Reserved,
        );
        refused(
            client
                .publish_channel(&"c".repeat(129), "x")
                .await
                .map(drop),
            NameKind::Channel,
            NameError::TooLong,
        );
        refused(
            client.subscribe(".").await.map(drop),
            NameKind::Channel,
            NameError::Reserved,
        );
        refused(
            client.publish_stream("a b").await.map(drop),
            NameKind::Topic,
            NameError::Characters,
        );
        let accepted = tokio::time::timeout(Duration::from_millis(50), listener.accept()).await;
        assert!(accepted.is_err(), "a request was sent");
    }
}
