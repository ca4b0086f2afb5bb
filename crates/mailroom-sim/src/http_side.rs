//! The same actions as the store side's, sent through the server's HTTP handlers: the
//! router of `mailroom-server` over the embedded backend in its deterministic mode
//! (`Embedded::on_the_calling_thread`) on the simulated store, one request at a time on
//! a current-thread runtime, each awaited before the next.
//!
//! Each JSON answer is decoded and turned back into the text the store side gives (a
//! delivery into `mailroom::topic::Delivery`, so its `Debug` is the store's), so the
//! candidate models check it the same way; refusals compare as their status and code
//! (`wire::on_the_wire` turns the model's answer into that form).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use mailroom::group::{Backoff, DeliveryId, NackKind, NackOptions};
use mailroom::topic::{Delivery, Nack};
use mailroom_api::batch::{AckResults, NackResults, PolledBatch};
use mailroom_api::deliveries::{DeliveryBody, NackOutcome};
use mailroom_api::topics::{BatchPublished, Published, TopicCreated};
use mailroom_api::ErrorBody;
use mailroom_server::backend::Embedded;
use mailroom_server::long_poll::LongPolls;
use mailroom_server::state::AppState;
use mailroom_store::Store;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tower::ServiceExt as _;

use crate::action::{Action, CONSUMERS, GROUPS, TOPICS};
use crate::model::{answer, Outcome};

/// The server's router over one open store, and the runtime its handlers run on.
#[derive(Debug)]
pub struct Server {
    runtime: tokio::runtime::Runtime,
    app: Router,
}

/// One answer: its status and body.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl Server {
    /// The router over `store` (a handle of the same store: drop the server with it).
    ///
    /// # Panics
    ///
    /// If a current-thread runtime cannot be built.
    pub fn new(store: &Store) -> Server {
        let backend = Embedded::new(store.clone(), false, Arc::new(LongPolls::default()))
            .on_the_calling_thread();
        let state = AppState::with_backend(Arc::new(backend), Default::default());
        Server {
            runtime: tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime"),
            app: mailroom_server::app::router(state),
        }
    }

    fn send(&self, method: Method, path: &str, body: Vec<u8>) -> Answer {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("a well-formed request");
        self.runtime.block_on(async {
            let response = self
                .app
                .clone()
                .oneshot(request)
                .await
                .expect("the router is infallible");
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map(|collected| collected.to_bytes())
                .unwrap_or_default();
            Answer { status, body }
        })
    }

    fn send_json(&self, method: Method, path: &str, body: &Value) -> Answer {
        self.send(method, path, body.to_string().into_bytes())
    }

    /// Sends `action` as its request and answers in the store side's text; `None` for an
    /// action without a route (retention passes, checkpoints, syncs, the clock,
    /// retention settings: those stay on the store side).
    pub fn apply(&self, action: &Action) -> Option<Outcome> {
        let topic = |t: usize| format!("/v1/topics/{}", TOPICS[t]);
        let group = |t: usize, g: usize| format!("{}/groups/{}", topic(t), GROUPS[g]);
        Some(match action {
            Action::CreateTopic(t) => {
                let got = self.send(Method::PUT, &topic(*t), Vec::new());
                decoded(got, |created: TopicCreated| created.created)
            }
            Action::DeleteTopic(t) => {
                decoded(self.send(Method::DELETE, &topic(*t), Vec::new()), unit)
            }
            Action::Publish(t, payload) => {
                let path = format!("{}/messages", topic(*t));
                let got = self.send(Method::POST, &path, payload.to_vec());
                decoded(got, |published: Published| published.offset)
            }
            Action::PublishBatch(t, payloads) => {
                let messages: Vec<Value> = payloads
                    .iter()
                    .map(|p| json!({ "base64": base64(p) }))
                    .collect();
                let path = format!("{}/messages/batch", topic(*t));
                let got = self.send_json(Method::POST, &path, &json!({ "messages": messages }));
                decoded(got, |batch: BatchPublished| {
                    let start = batch.offsets.first().copied().unwrap_or(0);
                    start..batch.offsets.last().map_or(start, |last| last + 1)
                })
            }
            Action::CreateGroup(t, g, config, earliest) => {
                let body = json!({
                    "max_attempts": config.max_attempts,
                    "start": if *earliest { "earliest" } else { "latest" },
                    "lease_ms": config.lease_ms,
                    "backoff": config.backoff.map(backoff),
                    "max_in_flight": config.max_in_flight,
                });
                decoded(self.send_json(Method::PUT, &group(*t, *g), &body), unit)
            }
            Action::DeleteGroup(t, g) => {
                decoded(self.send(Method::DELETE, &group(*t, *g), Vec::new()), unit)
            }
            Action::Poll(t, g, c) => {
                let body = CONSUMERS[*c].map_or(Vec::new(), |consumer| {
                    json!({ "consumer": consumer }).to_string().into_bytes()
                });
                let got = self.send(Method::POST, &format!("{}/poll", group(*t, *g)), body);
                if got.status == StatusCode::NO_CONTENT {
                    answer(Ok(None::<Delivery<Bytes>>))
                } else {
                    decoded(got, |body: DeliveryBody| Some(delivery(body)))
                }
            }
            Action::Ack(t, g, id) => {
                let path = format!("{}/ack", group(*t, *g));
                decoded(self.send_json(Method::POST, &path, &id_json(*id)), unit)
            }
            Action::Touch(t, g, id) => {
                let path = format!("{}/touch", group(*t, *g));
                decoded(self.send_json(Method::POST, &path, &id_json(*id)), unit)
            }
            Action::Nack(t, g, id, options) => {
                let mut body = nack_json(options);
                body["offset"] = json!(id.offset);
                body["attempt"] = json!(id.attempt);
                let path = format!("{}/nack", group(*t, *g));
                let got = self.send_json(Method::POST, &path, &body);
                decoded(got, |nacked: mailroom_api::deliveries::Nacked| {
                    nack(nacked.outcome)
                })
            }
            Action::PollBatch(t, g, c, max) => {
                let body = json!({ "consumer": CONSUMERS[*c], "max": max });
                let path = format!("{}/poll/batch", group(*t, *g));
                decoded(
                    self.send_json(Method::POST, &path, &body),
                    |batch: PolledBatch| deliveries(batch.deliveries),
                )
            }
            Action::AckThenPoll(t, g, acks, c, max) => {
                let acks: Vec<Value> = acks.iter().map(|id| id_json(*id)).collect();
                let body = json!({ "consumer": CONSUMERS[*c], "max": max, "ack": acks });
                let path = format!("{}/poll/batch", group(*t, *g));
                decoded(
                    self.send_json(Method::POST, &path, &body),
                    |batch: PolledBatch| {
                        let acked = batch.acked.unwrap_or_default();
                        let acked: Vec<ItemText> = acked
                            .into_iter()
                            .map(|item| item_text(item.error.map(|e| e.code), "()"))
                            .collect();
                        (acked, deliveries(batch.deliveries))
                    },
                )
            }
            Action::AckBatch(t, g, acks) => {
                let acks: Vec<Value> = acks.iter().map(|id| id_json(*id)).collect();
                let path = format!("{}/ack/batch", group(*t, *g));
                let got = self.send_json(Method::POST, &path, &json!({ "deliveries": acks }));
                decoded(got, |results: AckResults| {
                    let items: Vec<ItemText> = results
                        .results
                        .into_iter()
                        .map(|item| item_text(item.error.map(|e| e.code), "()"))
                        .collect();
                    items
                })
            }
            Action::NackBatch(t, g, nacks, options) => {
                let mut body = nack_json(options);
                body["deliveries"] = nacks.iter().map(|id| id_json(*id)).collect();
                let path = format!("{}/nack/batch", group(*t, *g));
                decoded(
                    self.send_json(Method::POST, &path, &body),
                    |r: NackResults| {
                        let items: Vec<ItemText> = r
                            .results
                            .into_iter()
                            .map(|item| {
                                let done = item.outcome.map(|o| format!("{:?}", nack(o)));
                                item_text(item.error.map(|e| e.code), done.as_deref().unwrap_or(""))
                            })
                            .collect();
                        items
                    },
                )
            }
            Action::Redrive(t, g, range) | Action::Purge(t, g, range) => {
                let verb = match action {
                    Action::Redrive(..) => "redrive",
                    _ => "purge",
                };
                let path = format!("{}/dead-letters/{verb}", group(*t, *g));
                let body = json!({ "from": range.start, "to": range.end });
                decoded(
                    self.send_json(Method::POST, &path, &body),
                    |taken: Taken| taken.count,
                )
            }
            Action::SetRetention(..)
            | Action::Retention
            | Action::Checkpoint
            | Action::Sync
            | Action::Advance(_) => return None,
        })
    }

    /// Sends the `n`th of the deliberately malformed requests ([`MALFORMED`]); answers
    /// the trace line, or what did not hold. None of them may change anything.
    ///
    /// # Errors
    ///
    /// An answer other than the one expected.
    pub fn malformed(&self, n: usize) -> Result<String, String> {
        let (method, path, body, status, code) = &MALFORMED[n % MALFORMED.len()];
        let got = self.send(method.clone(), path, body.as_bytes().to_vec());
        let error = serde_json::from_slice::<ErrorBody>(&got.body).ok();
        let got_code = error.as_ref().map(|e| e.error.to_string());
        let line = format!("{method} {path} {body} => {} {got_code:?}", got.status);
        if got.status.as_u16() != *status || got_code.as_deref() != Some(*code) {
            return Err(format!(
                "malformed request {line}, expected {status} {code}"
            ));
        }
        Ok(line)
    }
}

/// The deliberately malformed requests: method, path, body, and the status and error
/// code each must be refused with (whether or not the topic and group exist).
pub const MALFORMED: [(Method, &str, &str, u16, &str); 8] = [
    (Method::PUT, "/v1/topics/t%20x", "", 400, "invalid_name"),
    (
        Method::POST,
        "/v1/topics/t0/groups/a/ack",
        "{",
        400,
        "malformed_json",
    ),
    (
        Method::POST,
        "/v1/topics/t0/groups/a/ack",
        r#"{"offset":"1","attempt":1}"#,
        400,
        "invalid_body",
    ),
    (
        Method::POST,
        "/v1/topics/t1/groups/b/nack",
        r#"{"offset":1,"attempt":1,"kind":"sideways"}"#,
        400,
        "invalid_body",
    ),
    (
        Method::POST,
        "/v1/topics/t1/messages/batch",
        r#"{"messages":[]}"#,
        400,
        "invalid_argument",
    ),
    (
        Method::POST,
        "/v1/topics/t2/groups/a/poll/batch",
        r#"{"max":-1}"#,
        400,
        "invalid_body",
    ),
    (
        Method::PUT,
        "/v1/topics/t2/groups/b",
        r#"{"max_attempts":0}"#,
        400,
        "invalid_argument",
    ),
    (
        Method::POST,
        "/v1/topics/t0/groups/b/touch",
        r#"{"offset":1}"#,
        400,
        "invalid_body",
    ),
];

/// The count of a redrive or purge.
type Taken = mailroom_api::dead_letters::DeadLettersTaken;

/// One item of a batch settlement as the store side's `Debug` shows it, with a
/// refusal collapsed to its code (the wire does not carry `NotOwned`'s fields).
struct ItemText(String);

impl std::fmt::Debug for ItemText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn item_text(error: Option<mailroom_api::ErrorCode>, done: &str) -> ItemText {
    ItemText(match error {
        Some(code) => format!("Err({code})"),
        None => format!("Ok({done})"),
    })
}

/// The store side's text of a 2xx answer decoded as `T` and turned by `convert`, or of
/// a refusal (`HTTP <status> <code>`), or a fault for a 5xx (with the server's message,
/// which carries the store's error).
fn decoded<T: DeserializeOwned, U: std::fmt::Debug>(
    got: Answer,
    convert: impl FnOnce(T) -> U,
) -> Outcome {
    let error = || serde_json::from_slice::<ErrorBody>(&got.body);
    if got.status.is_server_error() {
        let message = error().map_or_else(|e| e.to_string(), |body| body.message);
        return Outcome::Fault(message);
    }
    if !got.status.is_success() {
        return Outcome::Answer(match error() {
            Ok(body) => format!("HTTP {} {}", got.status.as_u16(), body.error),
            Err(e) => format!("HTTP {} with a body that is not an error: {e}", got.status),
        });
    }
    match serde_json::from_slice::<T>(&got.body) {
        Ok(value) => answer(Ok(convert(value))),
        Err(e) => Outcome::Answer(format!("an answer that does not decode: {e}")),
    }
}

fn unit(_: Value) {}

fn base64(payload: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(payload)
}

fn id_json(id: DeliveryId) -> Value {
    json!({ "offset": id.offset, "attempt": id.attempt })
}

fn nack_json(options: &NackOptions) -> Value {
    let kind = match options.kind {
        NackKind::Nack => "nack",
        NackKind::Release => "release",
        NackKind::Reject => "reject",
    };
    let mut body = json!({ "kind": kind });
    if let Some(delay_ms) = options.delay_ms {
        body["delay_ms"] = json!(delay_ms);
    }
    if let Some(reason) = &options.reason {
        body["reason"] = json!(reason);
    }
    body
}

fn backoff(backoff: Backoff) -> Value {
    match backoff {
        Backoff::Fixed { delay_ms } => json!({ "kind": "fixed", "delay_ms": delay_ms }),
        Backoff::Exponential { base_ms, cap_ms } => {
            json!({ "kind": "exponential", "base_ms": base_ms, "cap_ms": cap_ms })
        }
    }
}

/// A nack's answer as the store gives it: a release is a retry that counts no failure.
fn nack(outcome: NackOutcome) -> Nack {
    match outcome {
        NackOutcome::Retry | NackOutcome::Released => Nack::Retry,
        NackOutcome::DeadLettered => Nack::DeadLettered,
    }
}

fn delivery(body: DeliveryBody) -> Delivery<Bytes> {
    let payload = match (body.payload, body.payload_base64) {
        (Some(text), _) => Bytes::from(text),
        (None, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map(Bytes::from)
            .unwrap_or_else(|_| Bytes::from_static(b"<payload_base64 that does not decode>")),
        (None, None) => Bytes::from_static(b"<no payload>"),
    };
    Delivery {
        offset: body.offset,
        attempt: body.attempt,
        message: payload,
    }
}

fn deliveries(bodies: Vec<DeliveryBody>) -> Vec<Delivery<Bytes>> {
    bodies.into_iter().map(delivery).collect()
}
