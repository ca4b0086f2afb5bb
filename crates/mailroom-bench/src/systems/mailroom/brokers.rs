//! The brokers one mailroom handle talks to, taking turns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use anyhow::Result;
use mailroom_client::Client;

/// The brokers a handle talks to: one, or several serving one database, in which case
/// every call goes to the next one in turn (as a round-robin load balancer would send
/// them), so one consumer's polls and acks land on different brokers.
#[derive(Debug, Clone)]
pub struct Brokers {
    clients: Arc<[Client]>,
    next: Arc<AtomicUsize>,
}

impl Brokers {
    /// A client per URL (`http://127.0.0.1:PORT`).
    ///
    /// # Errors
    /// When there is no URL or one is not an `http://` URL.
    pub fn new(urls: &[&str]) -> Result<Brokers> {
        anyhow::ensure!(!urls.is_empty(), "no broker address");
        let clients = urls
            .iter()
            .map(|url| Client::new(url))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Brokers {
            clients: clients.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The same brokers, their clients writing batch publishes in `encoding`.
    pub fn with_batch_encoding(self, encoding: mailroom_client::BatchEncoding) -> Brokers {
        let clients = self.clients.iter().cloned();
        Brokers {
            clients: clients.map(|c| c.with_batch_encoding(encoding)).collect(),
            next: self.next,
        }
    }

    /// The client for the next call.
    pub fn pick(&self) -> &Client {
        let index = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        &self.clients[index]
    }
}
