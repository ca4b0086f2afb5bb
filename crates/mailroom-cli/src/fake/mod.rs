//! A fake server for the commands' unit tests: it records every call as one line of text
//! (what was asked, with the arguments that matter) and answers with fixed values, so a
//! test states exactly what a command asked of the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use mailroom_client::{ClientError, Delivery};

use crate::api::Messages;

mod answers;
mod api;

/// The fake server. `deliveries` are handed out by polls in order; `messages` are what
/// every subscription yields before its channel ends.
#[derive(Default)]
pub struct Fake {
    calls: Mutex<Vec<String>>,
    deliveries: Mutex<Vec<Delivery>>,
    messages: Vec<Bytes>,
    read: Arc<AtomicU64>,
    subscribers: u64,
}

impl Fake {
    /// A fake with `count` deliveries waiting, offsets from 0.
    pub fn with_deliveries(count: u64) -> Fake {
        let deliveries = (0..count)
            .map(|offset| Delivery {
                offset,
                attempt: 1,
                payload: Bytes::from(format!("m{offset}")),
                key: None,
                headers: Default::default(),
                published_at_ms: None,
            })
            .collect();
        Fake {
            deliveries: Mutex::new(deliveries),
            ..Fake::default()
        }
    }

    /// A fake whose subscriptions each yield `messages`, then end; its channels report
    /// three subscribers (what `demo` waits for).
    pub fn with_messages(messages: &[&'static str]) -> Fake {
        Fake {
            messages: messages
                .iter()
                .map(|m| Bytes::from_static(m.as_bytes()))
                .collect(),
            subscribers: 3,
            ..Fake::default()
        }
    }

    /// The calls so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    /// How many messages all subscriptions have handed out.
    pub fn messages_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }

    fn record(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }

    fn next(&self) -> Option<Delivery> {
        let mut deliveries = self.deliveries.lock().unwrap();
        (!deliveries.is_empty()).then(|| deliveries.remove(0))
    }
}

/// A subscription of the fake: its messages, then the end of the channel.
pub struct FakeMessages {
    messages: std::vec::IntoIter<Bytes>,
    read: Arc<AtomicU64>,
}

impl Messages for FakeMessages {
    async fn next_message(&mut self) -> Option<Result<Bytes, ClientError>> {
        let message = self.messages.next()?;
        self.read.fetch_add(1, Ordering::Relaxed);
        Some(Ok(message))
    }
}

fn text(payload: &Bytes) -> String {
    String::from_utf8_lossy(payload).into_owned()
}
