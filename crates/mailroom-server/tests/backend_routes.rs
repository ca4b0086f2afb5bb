//! The routes over a backend that is not the store: a tiny in-memory fake behind
//! `Arc<dyn Backend>` answers the topic routes, which shows that the routes depend on the
//! `Backend` trait alone, and that its errors reach the client as the API's errors.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use mailroom::group::{DeliveryId, GroupConfig, NackOptions, NotOwned};
use mailroom::topic::{Delivery, Message, Nack, StartPosition};
use mailroom_server::backend::{
    Backend, BackendError, GroupDetail, GroupGauges, RetentionState, SettledRound, Settlements,
    TopicOffsets, TopicPublisher, TopicState,
};
use mailroom_server::long_poll::LongPolls;
use mailroom_server::{app::router, state::AppState, Config};
use mailroom_store::{DeadLetterPage, PollScope, StoreError};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tower::ServiceExt as _;

/// Topics as lists of messages, and nothing else: every group call fails.
#[derive(Debug, Default)]
struct Fake {
    topics: Mutex<BTreeMap<String, Vec<Bytes>>>,
    long_polls: Arc<LongPolls>,
}

const NO_GROUPS: &str = "this fake keeps no groups";

fn unknown(topic: &str) -> BackendError {
    BackendError::Store(StoreError::UnknownTopic {
        topic: topic.to_owned(),
    })
}

fn no_groups<T>() -> Result<T, BackendError> {
    Err(BackendError::Internal(NO_GROUPS.to_owned()))
}

impl Fake {
    fn append(&self, topic: &str, payloads: &[Bytes]) -> Result<Range<u64>, BackendError> {
        let mut topics = self.topics.lock();
        let messages = topics.get_mut(topic).ok_or_else(|| unknown(topic))?;
        let start = messages.len() as u64;
        messages.extend_from_slice(payloads);
        Ok(start..messages.len() as u64)
    }
}

#[async_trait]
impl Backend for Fake {
    fn long_polls(&self) -> &Arc<LongPolls> {
        &self.long_polls
    }
    async fn create_topic(&self, topic: &str) -> Result<bool, BackendError> {
        let mut topics = self.topics.lock();
        Ok(topics.insert(topic.to_owned(), Vec::new()).is_none())
    }
    async fn list_topics(&self) -> Result<Vec<TopicOffsets>, BackendError> {
        let topics = self.topics.lock();
        let listed = topics.iter().map(|(name, messages)| TopicOffsets {
            name: name.clone(),
            start: 0,
            end: messages.len() as u64,
            groups: Vec::new(),
            retention: RetentionState::default(),
            failure: None,
        });
        Ok(listed.collect())
    }
    async fn topic_state(&self, topic: &str) -> Result<TopicState, BackendError> {
        let topics = self.topics.lock();
        let messages = topics.get(topic).ok_or_else(|| unknown(topic))?;
        Ok(TopicState {
            name: topic.to_owned(),
            start: 0,
            end: messages.len() as u64,
            groups: Vec::new(),
            retention: RetentionState::default(),
            failure: None,
            idempotency: None,
        })
    }
    async fn delete_topic(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        let removed = self.topics.lock().remove(topic);
        removed.map(|_| Vec::new()).ok_or_else(|| unknown(topic))
    }
    async fn publish(&self, topic: &str, payload: Bytes) -> Result<u64, BackendError> {
        Ok(self.append(topic, &[payload])?.start)
    }
    async fn publish_batch(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        self.append(topic, payloads)
    }
    fn publisher(&self, _topic: &str) -> Result<Box<dyn TopicPublisher>, BackendError> {
        no_groups()
    }
    async fn create_group(
        &self,
        _: &str,
        _: &str,
        _: StartPosition,
        _: GroupConfig,
    ) -> Result<(), BackendError> {
        no_groups()
    }
    async fn group_detail(&self, _: &str, _: &str) -> Result<GroupDetail, BackendError> {
        no_groups()
    }
    async fn group_config(&self, _: &str, _: &str) -> Result<GroupConfig, BackendError> {
        no_groups()
    }
    async fn delete_group(&self, _: &str, _: &str) -> Result<(), BackendError> {
        no_groups()
    }
    async fn poll(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
    ) -> Result<Option<Delivery<Message<Bytes>>>, BackendError> {
        no_groups()
    }
    async fn poll_batch(
        &self,
        _: &str,
        _: &str,
        _: Option<&str>,
        _: usize,
        _: PollScope,
    ) -> Result<Vec<Delivery<Message<Bytes>>>, BackendError> {
        no_groups()
    }
    async fn settle_then_poll_batch(
        &self,
        _: &str,
        _: &str,
        _: Settlements<'_>,
        _: Option<&str>,
        _: usize,
        _: PollScope,
    ) -> Result<SettledRound, BackendError> {
        no_groups()
    }
    async fn ack(&self, _: &str, _: &str, _: DeliveryId) -> Result<(), BackendError> {
        no_groups()
    }
    async fn ack_batch(
        &self,
        _: &str,
        _: &str,
        _: &[DeliveryId],
    ) -> Result<Vec<Result<(), NotOwned>>, BackendError> {
        no_groups()
    }
    async fn nack(
        &self,
        _: &str,
        _: &str,
        _: DeliveryId,
        _: NackOptions,
    ) -> Result<Nack, BackendError> {
        no_groups()
    }
    async fn nack_batch(
        &self,
        _: &str,
        _: &str,
        _: &[DeliveryId],
        _: &NackOptions,
    ) -> Result<Vec<Result<Nack, NotOwned>>, BackendError> {
        no_groups()
    }
    async fn touch(&self, _: &str, _: &str, _: DeliveryId) -> Result<(), BackendError> {
        no_groups()
    }
    async fn redrive(&self, _: &str, _: &str, _: Range<u64>) -> Result<u64, BackendError> {
        no_groups()
    }
    async fn purge(&self, _: &str, _: &str, _: Range<u64>) -> Result<u64, BackendError> {
        no_groups()
    }
    async fn seek(&self, _: &str, _: &str, _: StartPosition) -> Result<u64, BackendError> {
        no_groups()
    }
    async fn pause(&self, _: &str, _: &str, _: Option<u64>) -> Result<(), BackendError> {
        no_groups()
    }
    async fn resume(&self, _: &str, _: &str) -> Result<bool, BackendError> {
        no_groups()
    }
    async fn dead_letter_page(
        &self,
        _: &str,
        _: &str,
        _: u64,
        _: usize,
    ) -> Result<DeadLetterPage<Message<Bytes>>, BackendError> {
        no_groups()
    }
    async fn next_due_in(&self, _: &str, _: &str) -> Result<Option<Duration>, BackendError> {
        no_groups()
    }
    async fn group_gauges(&self) -> Result<Vec<GroupGauges>, BackendError> {
        Ok(Vec::new())
    }
    async fn sync(&self) -> Result<(), BackendError> {
        Ok(())
    }
}

async fn send(app: &Router, method: &str, uri: &str, body: &'static str) -> (StatusCode, Value) {
    let request = Request::builder().method(method).uri(uri);
    let response = app.clone().oneshot(request.body(Body::from(body)).unwrap());
    let response = response.await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

// Proves the topic routes work over the fake exactly as over the store (create twice,
// publish one and a batch, list, describe, delete), an unknown topic is the API's 404,
// and a backend's own failure is a 500 `internal` carrying its message.
#[tokio::test]
async fn topic_routes_run_over_any_backend() {
    let backend: Arc<dyn Backend> = Arc::new(Fake::default());
    let app = router(AppState::with_backend(backend, Config::default()));
    let created = json!({"topic": "a", "created": true});
    assert_eq!(
        send(&app, "PUT", "/v1/topics/a", "").await,
        (StatusCode::CREATED, created)
    );
    let again = send(&app, "PUT", "/v1/topics/a", "").await;
    assert_eq!(
        again,
        (StatusCode::OK, json!({"topic": "a", "created": false}))
    );
    let one = send(&app, "POST", "/v1/topics/a/messages", "m0").await;
    assert_eq!(one, (StatusCode::CREATED, json!({"offset": 0})));
    let batch = r#"{"messages":["m1",{"base64":"/w=="}]}"#;
    let two = send(&app, "POST", "/v1/topics/a/messages/batch", batch).await;
    assert_eq!(two, (StatusCode::CREATED, json!({"offsets": [1, 2]})));

    // A backend that keeps no retention shows the defaults: unlimited, nothing removed.
    let retention = json!({"max_age_ms": null, "max_bytes": null, "max_messages": null, "keep_unconsumed": true});
    let removed = json!({"messages": 0, "bytes": 0, "segments": 0});
    let listed = json!({"topics": [{"name": "a", "start": 0, "end": 3, "groups": [],
        "retention": retention, "bytes": 0, "removed": removed, "state": "ok"}]});
    assert_eq!(
        send(&app, "GET", "/v1/topics", "").await,
        (StatusCode::OK, listed)
    );
    // ... and the server's idempotency window defaults.
    let window = json!({"window_messages": 10_000, "window_ms": 120_000});
    let described = json!({"name": "a", "start": 0, "end": 3, "groups": [],
        "retention": retention, "bytes": 0, "removed": removed, "state": "ok",
        "idempotency": window});
    assert_eq!(
        send(&app, "GET", "/v1/topics/a", "").await,
        (StatusCode::OK, described)
    );

    let (status, body) = send(&app, "GET", "/v1/topics/b", "").await;
    assert_eq!(
        (status, &body["error"]),
        (StatusCode::NOT_FOUND, &json!("unknown_topic"))
    );
    let (status, body) = send(&app, "POST", "/v1/topics/a/groups/g/poll", "").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(body, json!({"error": "internal", "message": NO_GROUPS}));

    let deleted = json!({"topic": "a", "deleted": true});
    assert_eq!(
        send(&app, "DELETE", "/v1/topics/a", "").await,
        (StatusCode::OK, deleted)
    );
    let (status, _) = send(&app, "GET", "/v1/topics/a", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

// Proves a topic's own idempotency window on a backend that keeps none is 501
// `not_supported` naming it (nothing created), while a create without one works.
#[tokio::test]
async fn a_topic_window_needs_a_backend_that_keeps_one() {
    let backend: Arc<dyn Backend> = Arc::new(Fake::default());
    let app = router(AppState::with_backend(backend, Config::default()));
    let body = r#"{"idempotency": {"window_ms": 5000}}"#;
    let (status, error) = send(&app, "PUT", "/v1/topics/a", body).await;
    assert_eq!(
        (status, &error["error"]),
        (StatusCode::NOT_IMPLEMENTED, &json!("not_supported"))
    );
    assert!(error["message"]
        .as_str()
        .unwrap()
        .contains("idempotency window"));
    let (status, _) = send(&app, "GET", "/v1/topics/a", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(&app, "PUT", "/v1/topics/a", r#"{"idempotency": {}}"#).await;
    assert_eq!(status, StatusCode::CREATED);
}
