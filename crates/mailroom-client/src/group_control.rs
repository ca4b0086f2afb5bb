//! Consumer groups beyond the seed: group settings, the detailed group view, nack kinds,
//! lease extension, consumer identities, and dead-letter redrive and purge.

use std::ops::Range;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::{Client, ClientError, Delivery, DeliveryId, GroupInfo, NackOutcome, StartPosition};

/// A group's retry backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Backoff {
    /// The same delay after every failure.
    Fixed {
        /// The delay, in milliseconds.
        delay_ms: u64,
    },
    /// `min(cap_ms, base_ms · 2^(k−1))` after the k-th failure.
    Exponential {
        /// The delay after the first failure, in milliseconds.
        base_ms: u64,
        /// The longest delay, in milliseconds.
        cap_ms: u64,
    },
}

/// The settings of a new group. `GroupOptions::new(n)` is the seed's group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupOptions {
    /// Failures allowed per message before it is dead-lettered.
    pub max_attempts: u32,
    /// Where the group starts.
    pub start: StartPosition,
    /// Each delivery's lease in milliseconds; `None`: owned until acked or nacked.
    pub lease_ms: Option<u64>,
    /// Delay before a failed message is redelivered; `None`: at once.
    pub backoff: Option<Backoff>,
    /// Deliveries in flight at once (W); `None`: 1.
    pub max_in_flight: Option<u32>,
}

impl GroupOptions {
    /// A group allowing `max_attempts`, from the earliest message, with no other setting.
    pub fn new(max_attempts: u32) -> GroupOptions {
        GroupOptions {
            max_attempts,
            start: StartPosition::Earliest,
            lease_ms: None,
            backoff: None,
            max_in_flight: None,
        }
    }

    fn body(&self) -> Value {
        let mut body = Map::new();
        body.insert("max_attempts".into(), json!(self.max_attempts));
        let start = match self.start {
            StartPosition::Earliest => json!("earliest"),
            StartPosition::Latest => json!("latest"),
            StartPosition::Offset(offset) => json!(offset),
        };
        body.insert("start".into(), start);
        if let Some(lease_ms) = self.lease_ms {
            body.insert("lease_ms".into(), json!(lease_ms));
        }
        if let Some(backoff) = self.backoff {
            body.insert("backoff".into(), json!(backoff));
        }
        if let Some(window) = self.max_in_flight {
            body.insert("max_in_flight".into(), json!(window));
        }
        Value::Object(body)
    }
}

/// How a nack ends a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NackKind {
    /// A failure: retried, or dead-lettered once failures reach `max_attempts`.
    #[default]
    Nack,
    /// Handed back without counting as a failure.
    Release,
    /// Dead-lettered at once.
    Reject,
}

/// What to do with a delivery given up on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct NackOptions {
    /// Nack, release or reject.
    pub kind: NackKind,
    /// Not redelivered before this many milliseconds (overrides the group's backoff).
    pub delay_ms: Option<u64>,
    /// Why; kept with the dead letter if this dead-letters the message.
    pub reason: Option<String>,
}

/// A group's event counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct GroupCounters {
    /// Deliveries that were not a message's first.
    pub redeliveries: u64,
    /// Deliveries handed back with a release.
    pub releases: u64,
    /// Deliveries whose lease ran out.
    pub expired_leases: u64,
    /// Dead letters put back by redrive.
    pub redrives: u64,
    /// Dead letters deleted by purge.
    pub purged: u64,
}

/// Why and when a message was dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeadLetterNote {
    /// The message's offset.
    pub offset: u64,
    /// The attempt number of its last delivery.
    pub attempts: u32,
    /// The reason of the final failure, if any (`"lease expired"` for a lease).
    pub reason: Option<String>,
    /// When, in Unix milliseconds.
    pub at_ms: u64,
}

/// A group's full state: the seed's fields, settings, counters, every delivery in
/// flight and the dead letters' reasons.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDetail {
    /// The seed's fields.
    #[serde(flatten)]
    pub info: GroupInfo,
    /// The lease of each delivery in milliseconds, if any.
    pub lease_ms: Option<u64>,
    /// The retry backoff, if any.
    pub backoff: Option<Backoff>,
    /// Deliveries allowed in flight at once (W).
    pub max_in_flight: u32,
    /// Event counters.
    pub counters: GroupCounters,
    /// Every delivery in flight, lowest offset first.
    pub deliveries: Vec<DeliveryId>,
    /// The dead letters' reasons and times, oldest first.
    pub dead_letter_notes: Vec<DeadLetterNote>,
}

#[derive(Deserialize)]
struct Taken {
    count: u64,
}

#[derive(Deserialize)]
struct Nacked {
    outcome: NackOutcome,
}

impl Client {
    pub(crate) fn group_path<'a>(topic: &'a str, group: &'a str, tail: &[&'a str]) -> Vec<&'a str> {
        let mut path = vec!["v1", "topics", topic, "groups", group];
        path.extend_from_slice(tail);
        path
    }

    /// Creates a group with `options` (lease, backoff, `max_in_flight`).
    ///
    /// # Errors
    /// `group_exists` (409), `invalid_argument` (400) for a setting out of range, 404s
    /// for unknown names, or a transport error.
    pub async fn create_group_with(
        &self,
        topic: &str,
        group: &str,
        options: &GroupOptions,
    ) -> Result<(), ClientError> {
        let request = self
            .request(Method::PUT, &Self::group_path(topic, group, &[]))?
            .json(&options.body());
        self.send(request).await?;
        Ok(())
    }

    /// A group's full state.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError> {
        let request = self.request(Method::GET, &Self::group_path(topic, group, &[]))?;
        self.json(request).await
    }

    /// Polls as `consumer`: its own delivery in flight (same attempt), or a new one.
    ///
    /// # Errors
    /// `invalid_argument` (400) for an empty or over-long consumer, 404s for unknown
    /// names, or a transport error.
    pub async fn poll_as(
        &self,
        topic: &str,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery>, ClientError> {
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &["poll"]))?
            .json(&json!({ "consumer": consumer }));
        Self::delivery_from(&self.send(request).await?)
    }

    /// Nacks, releases or rejects the exact delivery, with an optional delay and reason.
    ///
    /// # Errors
    /// `not_owned` (409) if `delivery` is not in flight; `invalid_argument` (400) for a
    /// delay or reason out of range; 404s for unknown names; or a transport error.
    pub async fn nack_with(
        &self,
        topic: &str,
        group: &str,
        delivery: DeliveryId,
        options: &NackOptions,
    ) -> Result<NackOutcome, ClientError> {
        let mut body = json!({
            "offset": delivery.offset,
            "attempt": delivery.attempt,
            "kind": options.kind,
        });
        if let Some(delay_ms) = options.delay_ms {
            body["delay_ms"] = json!(delay_ms);
        }
        if let Some(reason) = &options.reason {
            body["reason"] = json!(reason);
        }
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &["nack"]))?
            .json(&body);
        let nacked: Nacked = self.json(request).await?;
        Ok(nacked.outcome)
    }

    /// Extends the lease of the exact delivery in flight.
    ///
    /// # Errors
    /// `not_owned` (409) if it is not in flight or its lease ran out; 404s; transport.
    pub async fn touch(
        &self,
        topic: &str,
        group: &str,
        delivery: DeliveryId,
    ) -> Result<(), ClientError> {
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &["touch"]))?
            .json(&delivery);
        self.send(request).await?;
        Ok(())
    }

    /// Puts this group's dead letters (all, or those with offsets in `offsets`) back for
    /// delivery; returns how many.
    ///
    /// # Errors
    /// `invalid_argument` (400) for an inverted range, 404s, or a transport error.
    pub async fn redrive(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        self.take_dead_letters(topic, group, "redrive", offsets)
            .await
    }

    /// Deletes this group's dead letters (all, or those with offsets in `offsets`);
    /// returns how many.
    ///
    /// # Errors
    /// As for [`Client::redrive`].
    pub async fn purge(
        &self,
        topic: &str,
        group: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        self.take_dead_letters(topic, group, "purge", offsets).await
    }

    async fn take_dead_letters(
        &self,
        topic: &str,
        group: &str,
        action: &str,
        offsets: Option<Range<u64>>,
    ) -> Result<u64, ClientError> {
        let body = match offsets {
            Some(range) => json!({ "from": range.start, "to": range.end }),
            None => json!({}),
        };
        let path = Self::group_path(topic, group, &["dead-letters", action]);
        let request = self.request(Method::POST, &path)?.json(&body);
        let taken: Taken = self.json(request).await?;
        Ok(taken.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves only the settings given are sent, so a plain group stays a seed group.
    #[test]
    fn group_options_send_only_what_is_set() {
        let plain = GroupOptions::new(3).body();
        assert_eq!(plain, json!({ "max_attempts": 3, "start": "earliest" }));
        let mut options = GroupOptions::new(2);
        options.lease_ms = Some(100);
        options.backoff = Some(Backoff::Fixed { delay_ms: 5 });
        options.max_in_flight = Some(4);
        let body = options.body();
        assert_eq!(body["backoff"], json!({ "kind": "fixed", "delay_ms": 5 }));
        assert_eq!(body["lease_ms"], json!(100));
        assert_eq!(body["max_in_flight"], json!(4));
    }
}
