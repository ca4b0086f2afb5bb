//! One delivery at a time, with the options beyond a plain poll and nack: consumer
//! identities, nack kinds with a delay and a reason, and lease extension (`touch`).

use http::{Method, StatusCode};
use mailroom_api::deliveries::{DeliveryBody, NackRequest, Nacked, PollRequest};

use crate::exchange::Answer;
use crate::{Client, ClientError, Delivery, DeliveryId, NackKind, NackOutcome};

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
    /// Polls a group: the delivery in flight, a new attempt at the next message, or
    /// `None` when the group has finished everything published.
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn poll(&self, topic: &str, group: &str) -> Result<Option<Delivery>, ClientError> {
        let request = self.request(Method::POST, &Self::group_path(topic, group, &["poll"])?);
        Self::delivery_from(&self.send(request).await?)
    }

    /// Decodes a poll's answer: 204 is nothing waiting, 200 a delivery. Both poll forms
    /// (anonymous and as a consumer) answer alike.
    pub(crate) fn delivery_from(answer: &Answer) -> Result<Option<Delivery>, ClientError> {
        if answer.status == StatusCode::NO_CONTENT {
            return Ok(None);
        }
        let body: DeliveryBody = Self::decode(answer)?;
        Delivery::try_from(body).map(Some)
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
        self.settle(topic, group, "ack", delivery).await
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
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &["nack"])?)
            .json(&delivery);
        let nacked: Nacked = self.json(request).await?;
        Ok(nacked.outcome)
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
            .request(Method::POST, &Self::group_path(topic, group, &["poll"])?)
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
            .request(Method::POST, &Self::group_path(topic, group, &["nack"])?)
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
        self.settle(topic, group, "touch", delivery).await
    }

    /// Posts `delivery` to the group's `verb` (`ack`, `touch`), whose answer says nothing
    /// beyond success.
    async fn settle(
        &self,
        topic: &str,
        group: &str,
        verb: &str,
        delivery: DeliveryId,
    ) -> Result<(), ClientError> {
        let request = self
            .request(Method::POST, &Self::group_path(topic, group, &[verb])?)
            .json(&delivery);
        self.send(request).await?;
        Ok(())
    }
}
