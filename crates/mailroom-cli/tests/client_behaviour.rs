//! The clients' shared behaviour suite (`clients/behaviour/*.json`) against the Rust
//! client: the same scenarios the Python and TypeScript clients run, so the three cannot
//! drift. Each scenario gets a fresh server; `restart` kills it with SIGKILL and starts
//! it again on the same data directory (on a new port: the Rust client is made anew).
//! The suite's format is described in `clients/behaviour/README.md`.

mod behaviour_support;
mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use behaviour_support::streams::{messages, Streams, STREAM_OPS};
use behaviour_support::{
    bytes_value, check, code_of, delivery_value, group_options, id_of, nack_options, payload,
    range_of, refs, results, start_of, text,
};
use bytes::Bytes;
use common::{temp_dir, ServerProcess, SseReader};
use mailroom_client::{BatchNack, BatchPoll, Client, Subscription};
use serde_json::{json, Value};

/// The directory of the scenario files.
fn behaviour_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/behaviour")
}

/// A live subscription, over either transport.
enum Subscriber {
    Ws(Subscription),
    Sse(SseReader),
}

/// One scenario run: its server, client and subscriptions.
struct Runner {
    dir: tempfile::TempDir,
    server: Option<ServerProcess>,
    client: Client,
    subscriptions: HashMap<String, Subscriber>,
    streams: Streams,
    last_acked: Value,
    last_nacked: Value,
}

/// A step's failure: the error code it carries, or a description if it has none.
type Outcome = Result<Value, String>;

impl Runner {
    fn new() -> Runner {
        let dir = temp_dir();
        let server = ServerProcess::start(dir.path(), &["--fsync", "never"]);
        let client = server.client();
        Runner {
            dir,
            server: Some(server),
            client,
            subscriptions: HashMap::new(),
            streams: Streams::default(),
            last_acked: json!([]),
            last_nacked: json!([]),
        }
    }

    async fn run(&mut self, scenario: &Value) {
        let name = scenario["name"].as_str().expect("name");
        for (index, step) in scenario["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .enumerate()
        {
            let mut merged = serde_json::Map::new();
            for key in ["topic", "group", "channel"] {
                if let Some(value) = scenario.get(key) {
                    merged.insert(key.to_owned(), value.clone());
                }
            }
            merged.extend(step.as_object().expect("a step is an object").clone());
            let merged = Value::Object(merged);
            let at = format!("{name}: step {index} ({})", step["op"]);
            match (self.step(&merged).await, step.get("error")) {
                (Ok(answer), None) => {
                    if let Some(expected) = step.get("expect") {
                        check(expected, &answer, &at);
                    }
                    if let Some(expected) = step.get("acked") {
                        check(expected, &self.last_acked, &format!("{at}.acked"));
                    }
                    if let Some(expected) = step.get("nacked") {
                        check(expected, &self.last_nacked, &format!("{at}.nacked"));
                    }
                }
                (Ok(answer), Some(code)) => panic!("{at}: expected {code}, got {answer}"),
                (Err(got), Some(code)) => assert_eq!(code, &Value::String(got), "{at}"),
                (Err(got), None) => panic!("{at}: unexpected error {got}"),
            }
        }
    }

    async fn step(&mut self, s: &Value) -> Outcome {
        let c = &self.client;
        let op = s["op"].as_str().expect("op");
        let topic = s.get("topic").and_then(Value::as_str).unwrap_or("");
        let group = s.get("group").and_then(Value::as_str).unwrap_or("");
        if STREAM_OPS.contains(&op) {
            return self.streams.step(c, op, s).await;
        }
        let answer = match op {
            "create_topic" => json!(c.create_topic(topic).await.map_err(code_of)?),
            "delete_topic" => json!(c.delete_topic(topic).await.map_err(code_of)?),
            "create_group" => {
                c.create_group_with(topic, group, &group_options(s))
                    .await
                    .map_err(code_of)?;
                Value::Null
            }
            "delete_group" => json!(c.delete_group(topic, group).await.map_err(code_of)?),
            "publish" => match s.get("idempotency_key") {
                // The Rust client's single publish takes no idempotency key: a batch of one.
                Some(_) => self.streams.step(c, "publish_once", s).await?["offset"].clone(),
                None => json!(c
                    .publish(topic, payload(&s["payload"]))
                    .await
                    .map_err(code_of)?),
            },
            "publish_batch" => {
                let payloads: Vec<Bytes> = s["payloads"]
                    .as_array()
                    .expect("payloads")
                    .iter()
                    .map(payload)
                    .collect();
                json!(c.publish_batch(topic, &payloads).await.map_err(code_of)?)
            }
            "publish_stream" => self.publish_stream(topic, s).await?,
            "poll" => {
                let polled = match s.get("consumer").and_then(Value::as_str) {
                    Some(consumer) => c.poll_as(topic, group, consumer).await,
                    None => c.poll(topic, group).await,
                };
                polled
                    .map_err(code_of)?
                    .as_ref()
                    .map_or(Value::Null, delivery_value)
            }
            "poll_batch" => self.poll_batch(s, topic, group).await?,
            _ => return self.settle_step(op, s, topic, group).await,
        };
        Ok(answer)
    }

    /// The steps that settle deliveries and read a group's state.
    async fn settle_step(&mut self, op: &str, s: &Value, topic: &str, group: &str) -> Outcome {
        let c = &self.client;
        let answer = match op {
            "ack" => {
                c.ack(topic, group, id_of(s)).await.map_err(code_of)?;
                json!("acked")
            }
            "touch" => {
                c.touch(topic, group, id_of(s)).await.map_err(code_of)?;
                json!("touched")
            }
            "nack" => json!(c
                .nack_with(topic, group, id_of(s), &nack_options(s))
                .await
                .map_err(code_of)?),
            "ack_batch" => results(
                c.ack_batch(topic, group, &refs(&s["deliveries"]))
                    .await
                    .map_err(code_of)?
                    .into_iter()
                    .map(|r| r.map(|()| json!("acked")))
                    .collect(),
            ),
            "nack_batch" => results(
                c.nack_batch(topic, group, &refs(&s["deliveries"]), &nack_options(s))
                    .await
                    .map_err(code_of)?
                    .into_iter()
                    .map(|r| r.map(|outcome| json!(outcome)))
                    .collect(),
            ),
            "group" => serde_json::to_value(c.group_detail(topic, group).await.map_err(code_of)?)
                .expect("json"),
            "topic" => {
                serde_json::to_value(c.topic_info(topic).await.map_err(code_of)?).expect("json")
            }
            "dead_letters" => {
                let letters = c.dead_letters(topic, group).await.map_err(code_of)?;
                let letters = letters.iter().map(|l| json!({"offset": l.offset, "attempts": l.attempts, "payload": bytes_value(&l.payload)}));
                Value::Array(letters.collect())
            }
            "seek" => {
                let position = c.seek(topic, group, start_of(s.get("to"))).await;
                json!({ "position": position.map_err(code_of)? })
            }
            "pause" => serde_json::to_value(c.pause(topic, group, None).await.map_err(code_of)?)
                .expect("json"),
            "resume" => {
                serde_json::to_value(c.resume(topic, group).await.map_err(code_of)?).expect("json")
            }
            "redrive" => json!(c
                .redrive(topic, group, range_of(s))
                .await
                .map_err(code_of)?),
            "purge" => json!(c.purge(topic, group, range_of(s)).await.map_err(code_of)?),
            _ => return self.channel_step(op, s).await,
        };
        Ok(answer)
    }

    async fn channel_step(&mut self, op: &str, s: &Value) -> Outcome {
        let channel = s.get("channel").and_then(Value::as_str).unwrap_or("");
        let c = &self.client;
        let answer = match op {
            "create_channel" => {
                let max = s
                    .get("max_subscribers")
                    .and_then(Value::as_u64)
                    .unwrap_or(64);
                let capacity = s
                    .get("mailbox_capacity")
                    .and_then(Value::as_u64)
                    .unwrap_or(256);
                json!(c
                    .create_channel(channel, max, capacity)
                    .await
                    .map_err(code_of)?)
            }
            "close_channel" => json!(c.close_channel(channel).await.map_err(code_of)?),
            "channel" => {
                let all = c.list_channels().await.map_err(code_of)?;
                let info = all
                    .into_iter()
                    .find(|i| i.name == channel)
                    .ok_or("unknown_channel")?;
                let mut value = serde_json::to_value(&info).expect("json");
                value["dropped_some"] = json!(info.dropped > 0);
                value
            }
            "publish_channel" => serde_json::to_value(
                c.publish_channel(channel, payload(&s["payload"]))
                    .await
                    .map_err(code_of)?,
            )
            .expect("json"),
            "subscribe" => {
                let subscriber = if s["transport"] == "sse" {
                    Subscriber::Sse(self.sse(channel).await?)
                } else {
                    Subscriber::Ws(c.subscribe(channel).await.map_err(code_of)?)
                };
                self.subscriptions.insert(text(s, "as"), subscriber);
                Value::Null
            }
            "receive" => self.receive(&text(s, "sub")).await,
            "flood" => {
                let message = Bytes::from(vec![
                    b'x';
                    s["payload_bytes"].as_u64().expect("bytes") as usize
                ]);
                let mut dropped = false;
                for _ in 0..s["publishes_max"].as_u64().expect("publishes_max") {
                    if c.publish_channel(channel, message.clone())
                        .await
                        .map_err(code_of)?
                        .dropped
                        > 0
                    {
                        dropped = true;
                        break;
                    }
                }
                json!({ "dropped_some": dropped })
            }
            "restart" => {
                self.server.take().expect("running").kill();
                let server = ServerProcess::start(self.dir.path(), &["--fsync", "never"]);
                self.client = server.client();
                self.server = Some(server);
                Value::Null
            }
            other => panic!("unknown op {other}"),
        };
        Ok(answer)
    }

    async fn sse(&self, channel: &str) -> Result<SseReader, String> {
        let url = self
            .server
            .as_ref()
            .expect("running")
            .at(&format!("/v1/channels/{channel}/events"));
        let response = reqwest::get(url).await.map_err(|e| e.to_string())?;
        if response.status().is_success() {
            return Ok(SseReader::new(response));
        }
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        Err(text(&body, "error"))
    }

    async fn receive(&mut self, name: &str) -> Value {
        match self
            .subscriptions
            .get_mut(name)
            .expect("a subscription of that name")
        {
            Subscriber::Ws(subscription) => match subscription.next().await {
                Some(message) => bytes_value(&message.expect("a message")),
                None => Value::Null,
            },
            Subscriber::Sse(reader) => match reader.next().await {
                Some(event) if event.event.as_deref() == Some("base64") => {
                    json!({ "base64": event.data })
                }
                Some(event) => bytes_value(event.data.as_bytes()),
                None => Value::Null,
            },
        }
    }

    async fn poll_batch(&mut self, s: &Value, topic: &str, group: &str) -> Outcome {
        let acks = s.get("ack").map(refs).unwrap_or_default();
        let request = BatchPoll {
            consumer: s.get("consumer").and_then(Value::as_str),
            max: s["max"].as_u64().expect("max") as u32,
            wait_ms: s.get("wait_ms").and_then(Value::as_u64).unwrap_or(0),
            ack: &acks,
        };
        let nacks = s.get("nack").map(|nack| refs(&nack["deliveries"]));
        let options = s.get("nack").map(nack_options).unwrap_or_default();
        let nack = BatchNack {
            deliveries: nacks.as_deref().unwrap_or_default(),
            options: &options,
        };
        let polled = self
            .client
            .settle_then_poll_batch(topic, group, &request, &nack);
        let (settled, ()) = match s.get("publish_meanwhile") {
            // The long poll is held until a delivery exists, so the order is not raced.
            Some(late) => {
                let publish = async {
                    self.client
                        .publish(topic, payload(late))
                        .await
                        .expect("publish");
                };
                let (polled, ()) = tokio::join!(polled, publish);
                (polled.map_err(code_of)?, ())
            }
            None => (polled.await.map_err(code_of)?, ()),
        };
        let acked = settled.acked.into_iter();
        self.last_acked = results(acked.map(|r| r.map(|()| json!("acked"))).collect());
        let nacked = settled.nacked.into_iter();
        self.last_nacked = results(nacked.map(|r| r.map(|outcome| json!(outcome))).collect());
        Ok(Value::Array(
            settled.deliveries.iter().map(delivery_value).collect(),
        ))
    }

    async fn publish_stream(&self, topic: &str, s: &Value) -> Outcome {
        let mut stream = self.client.publish_stream(topic).await.map_err(code_of)?;
        if let Some(items) = s.get("messages") {
            for message in messages(items) {
                stream.send_message(&message).await.map_err(code_of)?;
            }
        }
        for item in s
            .get("payloads")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            stream.send(payload(item)).await.map_err(code_of)?;
        }
        let confirmations = stream.flush().await.map_err(code_of)?;
        stream.close().await.map_err(code_of)?;
        let offsets = confirmations
            .iter()
            .flat_map(|c| c.offsets().expect("published"));
        Ok(json!(offsets.collect::<Vec<u64>>()))
    }
}

/// Runs every scenario of `clients/behaviour/<file>.json`, each on a fresh server.
async fn run_file(file: &str) {
    let path = behaviour_dir().join(format!("{file}.json"));
    let suite: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    for scenario in suite["scenarios"].as_array().expect("scenarios") {
        let mut runner = Runner::new();
        runner.run(scenario).await;
    }
}

/// The files the tests below run: a new file must get its test here.
const FILES: &[&str] = &[
    "batches",
    "channels",
    "consume_stream",
    "deliveries",
    "group_moves",
    "idempotent_publish",
    "nack_kinds",
    "restart",
];

#[test]
fn every_behaviour_file_is_run() {
    let mut found: Vec<String> = std::fs::read_dir(behaviour_dir())
        .expect("clients/behaviour")
        .filter_map(|entry| {
            let name = entry
                .expect("entry")
                .file_name()
                .into_string()
                .expect("utf-8");
            name.strip_suffix(".json").map(str::to_owned)
        })
        .collect();
    found.sort();
    assert_eq!(found, FILES);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries() {
    run_file("deliveries").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches() {
    run_file("batches").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nack_kinds() {
    run_file("nack_kinds").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channels() {
    run_file("channels").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_moves() {
    run_file("group_moves").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart() {
    run_file("restart").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_stream() {
    run_file("consume_stream").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_publish() {
    run_file("idempotent_publish").await;
}
