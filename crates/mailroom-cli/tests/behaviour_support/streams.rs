//! The behaviour suite's consume stream and idempotent publish steps against the Rust
//! client: open consume streams by name, the answers they have received, and the
//! settlements they have sent.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use mailroom_client::{Client, ConsumeStream, Delivery, NewMessage, Settled, StreamEvent};
use serde_json::{json, Value};

use super::{code_of, delivery_value, id_of, nack_options, payload, text};

/// The suite's ops this module runs.
pub const STREAM_OPS: &[&str] = &[
    "consume_stream",
    "stream_receive",
    "stream_ack",
    "stream_nack",
    "stream_touch",
    "stream_answers",
    "stream_close",
    "publish_once",
    "publish_batch_once",
];

/// How long `stream_answers` waits for the answers owed.
const ANSWERS_WAIT: Duration = Duration::from_secs(30);

/// One open stream with what it received and sent.
struct Open {
    stream: ConsumeStream,
    /// Deliveries received (while waiting for answers) and not yet taken.
    deliveries: VecDeque<Delivery>,
    /// Answers received (while waiting for a delivery) and not yet taken.
    answers: Vec<Settled>,
    /// Settlements sent and not yet answered.
    unanswered: u64,
}

/// The open consume streams of one scenario run, by name.
#[derive(Default)]
pub struct Streams {
    open: HashMap<String, Open>,
}

/// The suite's `messages`: `{"payload", "idempotency_key"}` objects.
pub fn messages(items: &Value) -> Vec<NewMessage> {
    let items = items.as_array().expect("messages");
    items
        .iter()
        .map(|item| {
            let message = NewMessage::new(payload(&item["payload"]));
            match item.get("idempotency_key").and_then(Value::as_str) {
                Some(key) => message.with_idempotency_key(key),
                None => message,
            }
        })
        .collect()
}

/// An answer in the suite's form: `{seq, outcome}` or `{seq, error}`.
fn answer(settled: &Settled) -> Value {
    match &settled.outcome {
        Ok(outcome) => json!({ "seq": settled.seq, "outcome": outcome }),
        Err(refusal) => json!({ "seq": settled.seq, "error": refusal.code.as_str() }),
    }
}

impl Streams {
    /// Runs `op` (one of [`STREAM_OPS`]).
    pub async fn step(&mut self, client: &Client, op: &str, s: &Value) -> Result<Value, String> {
        let topic = s.get("topic").and_then(Value::as_str).unwrap_or("");
        let group = s.get("group").and_then(Value::as_str).unwrap_or("");
        match op {
            // The Rust client has no single publish with an idempotency key: the runner
            // sends a batch of one, which the server deduplicates by the same window.
            "publish_once" => {
                let message = NewMessage::new(payload(&s["payload"]))
                    .with_idempotency_key(text(s, "idempotency_key"));
                let answer = client
                    .publish_once(topic, &[message])
                    .await
                    .map_err(code_of)?;
                Ok(json!({ "offset": answer.offsets[0], "duplicate": answer.duplicates == [0] }))
            }
            "publish_batch_once" => {
                let answer = client
                    .publish_once(topic, &messages(&s["messages"]))
                    .await
                    .map_err(code_of)?;
                Ok(json!({ "offsets": answer.offsets, "duplicates": answer.duplicates }))
            }
            "consume_stream" => {
                let window = s.get("window").and_then(Value::as_u64).unwrap_or(1) as u32;
                let consumer = s.get("consumer").and_then(Value::as_str);
                let stream = client
                    .consume_stream(topic, group, window, consumer)
                    .await
                    .map_err(code_of)?;
                let opened = json!({ "consumer": stream.consumer(), "window": stream.window() });
                let open = Open {
                    stream,
                    deliveries: VecDeque::new(),
                    answers: Vec::new(),
                    unanswered: 0,
                };
                self.open.insert(text(s, "as"), open);
                Ok(opened)
            }
            _ => self.settle_step(op, s).await,
        }
    }

    async fn settle_step(&mut self, op: &str, s: &Value) -> Result<Value, String> {
        let name = text(s, "stream");
        let open = self.open.get_mut(&name).expect("a stream of that name");
        let seq = match op {
            "stream_receive" => return Ok(open.receive(s.get("wait_ms")).await),
            "stream_answers" => return open.answers().await,
            "stream_close" => {
                let open = self.open.remove(&name).expect("open");
                open.stream.close().await.map_err(code_of)?;
                return Ok(Value::Null);
            }
            "stream_ack" => open.stream.ack(id_of(s)).await,
            "stream_touch" => open.stream.touch(id_of(s)).await,
            "stream_nack" => open.stream.nack(id_of(s), &nack_options(s)).await,
            other => panic!("unknown op {other}"),
        };
        open.unanswered += 1;
        Ok(json!(seq.map_err(code_of)?))
    }
}

impl Open {
    /// The next delivery (answers arriving meanwhile kept); null once the stream ended,
    /// or when none came within `wait_ms`.
    async fn receive(&mut self, wait_ms: Option<&Value>) -> Value {
        if let Some(delivery) = self.deliveries.pop_front() {
            return delivery_value(&delivery);
        }
        let wait = wait_ms.and_then(Value::as_u64).map(Duration::from_millis);
        loop {
            let next = match wait {
                Some(wait) => match tokio::time::timeout(wait, self.stream.next()).await {
                    Ok(next) => next,
                    Err(_) => return Value::Null,
                },
                None => self.stream.next().await,
            };
            match next {
                Ok(Some(StreamEvent::Delivery(delivery))) => return delivery_value(&delivery),
                Ok(Some(StreamEvent::Settled(settled))) => self.take(settled),
                // A broken connection (a killed server) ends the stream as a close does.
                Ok(None) | Err(_) => return Value::Null,
            }
        }
    }

    /// Waits until every settlement sent is answered; the answers not taken yet.
    async fn answers(&mut self) -> Result<Value, String> {
        while self.unanswered > 0 {
            match tokio::time::timeout(ANSWERS_WAIT, self.stream.next()).await {
                Ok(Ok(Some(StreamEvent::Settled(settled)))) => self.take(settled),
                // An ack frees a slot of the window, so a delivery may come first.
                Ok(Ok(Some(StreamEvent::Delivery(delivery)))) => {
                    self.deliveries.push_back(delivery)
                }
                Ok(Ok(None)) => return Err("stream closed with answers owed".into()),
                Ok(Err(error)) => return Err(code_of(error)),
                Err(_) => return Err("answers did not come".into()),
            }
        }
        Ok(Value::Array(
            self.answers.drain(..).map(|a| answer(&a)).collect(),
        ))
    }

    fn take(&mut self, settled: Settled) {
        self.unanswered -= 1;
        self.answers.push(settled);
    }
}
