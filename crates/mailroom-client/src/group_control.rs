//! Consumer groups: group settings, the detailed group view, nack kinds, lease
//! extension, consumer identities, and dead-letter redrive and purge.

use std::ops::Range;

use mailroom_api::dead_letters::{DeadLettersTaken, OffsetRange};
use mailroom_api::deliveries::{NackRequest, Nacked, PollRequest};
use mailroom_api::groups::CreateGroup;
use reqwest::Method;

use crate::{
    Backoff, Client, ClientError, Delivery, DeliveryId, GroupDetail, NackKind, NackOutcome,
    StartPosition,
};

/// The settings of a new group. `GroupOptions::new(n)` sets `max_attempts` alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GroupOptions {
    /// Failures allowed per message, as the wire format defines it
    /// ([`CreateGroup::max_attempts`]).
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

    fn body(&self) -> CreateGroup {
        CreateGroup {
            max_attempts: self.max_attempts,
            start: Some(self.start.into()),
            lease_ms: self.lease_ms,
            backoff: self.backoff,
            max_in_flight: self.max_in_flight,
        }
    }
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

impl NackOptions {
    /// The body of a nack of `delivery` with these options.
    fn request(&self, delivery: DeliveryId) -> NackRequest {
        NackRequest {
            offset: delivery.offset,
            attempt: delivery.attempt,
            kind: self.kind,
            delay_ms: self.delay_ms,
            reason: self.reason.clone(),
        }
    }
}

impl Client {
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
            .request(Method::PUT, &Self::group_path(topic, group, &[])?)?
            .json(&options.body());
        self.send(request).await?;
        Ok(())
    }

    /// A group's full state.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn group_detail(&self, topic: &str, group: &str) -> Result<GroupDetail, ClientError> {
        let request = self.request(Method::GET, &Self::group_path(topic, group, &[])?)?;
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
            .request(Method::POST, &Self::group_path(topic, group, &["poll"])?)?
            .json(&PollRequest {
                consumer: Some(consumer.to_owned()),
            });
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
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &["nack"])?)?
            .json(&options.request(delivery));
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
            .request(Method::POST, &Self::group_path(topic, group, &["touch"])?)?
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
            Some(range) => OffsetRange {
                from: Some(range.start),
                to: Some(range.end),
            },
            None => OffsetRange::default(),
        };
        let path = Self::group_path(topic, group, &["dead-letters", action])?;
        let request = self.request(Method::POST, &path)?.json(&body);
        let taken: DeadLettersTaken = self.json(request).await?;
        Ok(taken.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use serde_json::json;

    // Proves only the settings given are sent, so a plain group has no other setting.
    #[test]
    fn group_options_send_only_what_is_set() {
        let plain = serde_json::to_value(GroupOptions::new(3).body()).unwrap();
        assert_eq!(plain, json!({ "max_attempts": 3, "start": "earliest" }));
        let mut options = GroupOptions::new(2);
        options.lease_ms = Some(100);
        options.backoff = Some(Backoff::Fixed { delay_ms: 5 });
        options.max_in_flight = Some(4);
        let body = serde_json::to_value(options.body()).unwrap();
        assert_eq!(body["backoff"], json!({ "kind": "fixed", "delay_ms": 5 }));
        assert_eq!(body["lease_ms"], json!(100));
        assert_eq!(body["max_in_flight"], json!(4));
    }
}
