//! The deliveries of a [`DurableTopic`]'s groups one at a time: polls (anonymous or as a
//! named consumer), acks, nacks of every kind, and lease extension, with time from the
//! store's clock. Each change is durable before it returns (or before its
//! [`Deferred`] answers).

use bytes::Bytes;
use mailroom::group::{DeliveryId, NackOptions};
use mailroom::topic::{Delivery, Nack, TopicError};

use crate::groups::GroupSet;
use crate::{Deferred, DurableTopic, StoreError};

impl DurableTopic {
    /// Polls `group`: returns the delivery in flight unchanged, or creates the next
    /// attempt at the group's cursor, or `None` at the end of the log.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop.
    pub fn poll(&self, group: &str) -> Result<Option<Delivery<Bytes>>, StoreError> {
        self.poll_deferred(group)?.wait()
    }

    /// [`poll`](Self::poll) without the wait: the delivery is made (and written) now and
    /// handed out by the [`Deferred`] once durable.
    ///
    /// # Errors
    ///
    /// As [`poll`](Self::poll); I/O errors of reading the message come from the
    /// `Deferred`.
    pub fn poll_deferred(
        &self,
        group: &str,
    ) -> Result<Deferred<Option<Delivery<Bytes>>>, StoreError> {
        let batch = self.poll_messages_deferred(group, None, 1, crate::PollScope::All)?;
        Ok(batch.and_then(|mut batch| {
            Ok(batch.pop().map(|delivery| Delivery {
                offset: delivery.offset,
                attempt: delivery.attempt,
                message: delivery.message.payload,
            }))
        }))
    }

    /// Polls `group` as `consumer`, as `mailroom::topic::Topic::poll_as`.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for an empty or over-long consumer; as
    /// [`poll`](Self::poll).
    pub fn poll_as(
        &self,
        group: &str,
        consumer: &str,
    ) -> Result<Option<Delivery<Bytes>>, StoreError> {
        self.poll_as_deferred(group, consumer)?.wait()
    }

    /// [`poll_as`](Self::poll_as) without the wait (see
    /// [`poll_deferred`](Self::poll_deferred)).
    ///
    /// # Errors
    ///
    /// As [`poll_as`](Self::poll_as); I/O errors of reading the message come from the
    /// [`Deferred`].
    pub fn poll_as_deferred(
        &self,
        group: &str,
        consumer: &str,
    ) -> Result<Deferred<Option<Delivery<Bytes>>>, StoreError> {
        let batch = self.poll_batch_deferred(group, Some(consumer), 1)?;
        Ok(batch.and_then(|mut batch| Ok(batch.pop())))
    }

    /// Acks the exact in-flight delivery: the cursor moves past it.
    ///
    /// # Errors
    ///
    /// `Topic(NotOwned)` unless `delivery` is the one in flight (nothing changes);
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop.
    pub fn ack(&self, group: &str, delivery: DeliveryId) -> Result<(), StoreError> {
        self.ack_deferred(group, delivery)?.wait()
    }

    /// [`ack`](Self::ack) without the wait. A refusal (`Topic(NotOwned)`) comes from the
    /// [`Deferred`] too: it may reflect changes (a lease expiry, another consumer's ack)
    /// that are not durable yet.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`, write errors and fail-stop here; the rest of
    /// [`ack`](Self::ack)'s from the `Deferred`.
    pub fn ack_deferred(
        &self,
        group: &str,
        delivery: DeliveryId,
    ) -> Result<Deferred<()>, StoreError> {
        let settled = self.settle_deferred(group, &[delivery], None)?;
        Ok(settled.and_then(|mut results| {
            let result = results.pop().expect("one result per delivery");
            result.map(drop).map_err(GroupSet::not_owned(group))
        }))
    }

    /// Nacks the exact in-flight delivery: a retry while attempts remain, else the
    /// message is dead-lettered (once) and the cursor moves on.
    ///
    /// # Errors
    ///
    /// As [`ack`](Self::ack).
    pub fn nack(&self, group: &str, delivery: DeliveryId) -> Result<Nack, StoreError> {
        self.nack_with_deferred(group, delivery, NackOptions::default())?
            .wait()
    }

    /// Nacks, releases or rejects the exact delivery in flight, per `options`.
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for options out of range; as [`nack`](Self::nack).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom::group::{NackKind, NackOptions};
    /// use mailroom::topic::Nack;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 5)?;
    /// topic.publish(Bytes::from_static(b"bad"))?;
    /// let delivery = topic.poll("g")?.expect("a message");
    /// let reject = NackOptions::new(NackKind::Reject).with_reason("schema mismatch");
    /// assert_eq!(topic.nack_with("g", delivery.id(), reject)?, Nack::DeadLettered);
    /// let dead = topic.dead_letter_info("g")?;
    /// assert_eq!(dead[0].reason.as_deref(), Some("schema mismatch"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn nack_with(
        &self,
        group: &str,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Nack, StoreError> {
        self.nack_with_deferred(group, delivery, options)?.wait()
    }

    /// [`nack_with`](Self::nack_with) without the wait. A refusal (`Topic(NotOwned)`)
    /// comes from the [`Deferred`] (see [`ack_deferred`](Self::ack_deferred)).
    ///
    /// # Errors
    ///
    /// `Topic(InvalidArgument)` for options out of range, `Topic(UnknownGroup)`, write
    /// errors and fail-stop here; the rest of [`nack_with`](Self::nack_with)'s from the
    /// `Deferred`.
    pub fn nack_with_deferred(
        &self,
        group: &str,
        delivery: DeliveryId,
        options: NackOptions,
    ) -> Result<Deferred<Nack>, StoreError> {
        options.check().map_err(TopicError::from)?;
        let settled = self.settle_deferred(group, &[delivery], Some(&options))?;
        Ok(settled.and_then(|mut results| {
            let result = results.pop().expect("one result per delivery");
            result.map_err(GroupSet::not_owned(group))
        }))
    }

    /// Extends the lease of the exact delivery in flight.
    ///
    /// # Errors
    ///
    /// As [`ack`](Self::ack).
    pub fn touch(&self, group: &str, delivery: DeliveryId) -> Result<(), StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .touch(&self.inner.messages, group, delivery)
    }
}
