//! The dead letters of a [`DurableTopic`]'s groups: reading them all (with or without
//! reasons and times), redriving them back to their group, purging them, and reading
//! them one page at a time, for callers (the server's
//! `GET .../dead-letters?from=&limit=`) that must not read every payload of a long
//! dead-letter queue to answer for a few.
//!
//! Pages go by ascending offset. A page holds the dead letters with offset at or after
//! `from`, at most `limit` of them, and names the offset to ask for next; walking the
//! pages from 0 with each page's `next` visits every dead letter once, in offset order,
//! exactly what [`DurableTopic::dead_letter_info`] holds, sorted by offset. Each page
//! reads from disk only its own payloads.

use std::ops::Range;

use bytes::Bytes;
use mailroom::topic::{DeadLetter, DeadLetterInfo};

use mailroom_api::limits::PAGE_BYTES_MAX;

use crate::{DurableTopic, StoreError};

/// The most dead letters one [`DurableTopic::dead_letter_page`] may ask for.
pub const DEAD_LETTERS_PAGE_MAX: usize = 10_000;

/// One page of a group's dead letters, from [`DurableTopic::dead_letter_page`] (`M`:
/// what each carries of its message; the store answers payloads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterPage<M = Bytes> {
    /// The dead letters with offset at or after the page's `from`, by ascending offset, at
    /// most the page's `limit` of them and at most its byte cap of payloads (but at least
    /// one), each with its reason, time and payload.
    pub letters: Vec<DeadLetterInfo<M>>,
    /// The `from` of the next page: the offset of the first dead letter after this page
    /// (left out by the count or by the byte cap), or `None` when this page is the last.
    pub next: Option<u64>,
}

impl DurableTopic {
    /// The group's dead letters, oldest first, with their payloads (kept even after
    /// retention deleted the original messages).
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and corruption.
    pub fn dead_letters(&self, group: &str) -> Result<Vec<DeadLetter<Bytes>>, StoreError> {
        let _live = self.live()?;
        self.inner.groups.dead_letters(&self.inner.messages, group)
    }

    /// `group`'s dead letters with reasons, times and payloads, oldest first.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and corruption.
    pub fn dead_letter_info(&self, group: &str) -> Result<Vec<DeadLetterInfo<Bytes>>, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .dead_letter_info(&self.inner.messages, group)
    }

    /// One page of `group`'s dead letters: those with offset `>= from`, by ascending
    /// offset, at most `limit` and at most [`PAGE_BYTES_MAX`] bytes of payloads (but at
    /// least one letter, however large), and the offset to ask for next (see
    /// [`DeadLetterPage`]). Only the page's payloads are read from disk.
    ///
    /// A dead letter made, redriven or purged between two calls shows up in (or drops
    /// out of) a later page if its offset is at or after that page's `from`; each page is
    /// consistent in itself.
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidArgument`] if `limit` is 0 or above [`DEAD_LETTERS_PAGE_MAX`];
    /// `Topic(UnknownGroup)`; I/O errors and corruption.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 1)?;
    /// for text in ["a", "b", "c"] {
    ///     topic.publish(Bytes::from(text))?;
    ///     let delivery = topic.poll("g")?.expect("the message just published");
    ///     topic.nack("g", delivery.id())?; // one attempt: dead-lettered
    /// }
    /// let first = topic.dead_letter_page("g", 0, 2)?;
    /// let offsets: Vec<u64> = first.letters.iter().map(|dead| dead.offset).collect();
    /// assert_eq!((offsets, first.next), (vec![0, 1], Some(2)));
    /// let last = topic.dead_letter_page("g", 2, 2)?;
    /// assert_eq!(last.letters[0].message, Bytes::from("c"));
    /// assert_eq!(last.next, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dead_letter_page(
        &self,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, StoreError> {
        self.dead_letter_page_within(group, from, limit, PAGE_BYTES_MAX)
    }

    /// As [`dead_letter_page`](Self::dead_letter_page), with the byte cap `bytes_max` in
    /// place of [`PAGE_BYTES_MAX`]: the page stops before the letter whose payload would
    /// take it past `bytes_max`, and `next` names that letter.
    ///
    /// # Errors
    ///
    /// As [`dead_letter_page`](Self::dead_letter_page).
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 1)?;
    /// for _ in 0..3 {
    ///     topic.publish(Bytes::from(vec![7; 100]))?;
    ///     let delivery = topic.poll("g")?.expect("the message just published");
    ///     topic.nack("g", delivery.id())?;
    /// }
    /// // 250 bytes hold two payloads of 100, not three.
    /// let page = topic.dead_letter_page_within("g", 0, 10, 250)?;
    /// assert_eq!((page.letters.len(), page.next), (2, Some(2)));
    /// // A cap below one payload still gives one letter a page.
    /// let page = topic.dead_letter_page_within("g", 0, 10, 1)?;
    /// assert_eq!((page.letters.len(), page.next), (1, Some(1)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn dead_letter_page_within(
        &self,
        group: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<DeadLetterPage, StoreError> {
        if limit == 0 || limit > DEAD_LETTERS_PAGE_MAX {
            return Err(StoreError::InvalidArgument {
                reason: format!("limit must be in 1..={DEAD_LETTERS_PAGE_MAX}, got {limit}"),
            });
        }
        let _live = self.live()?;
        let (letters, next) = self.inner.groups.dead_letter_page(
            &self.inner.messages,
            group,
            (from, limit),
            bytes_max,
        )?;
        Ok(DeadLetterPage { letters, next })
    }

    /// Puts `group`'s dead letters with offsets in `offsets` back for delivery (payloads
    /// come from the dead letters' own copies, so this works after retention); returns
    /// how many. Other groups are untouched.
    ///
    /// # Errors
    ///
    /// `Topic(UnknownGroup)`; I/O errors and fail-stop.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use mailroom_store::{Store, StoreOptions};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path(), StoreOptions::default())?;
    /// store.create_topic("t")?;
    /// let topic = store.topic("t")?;
    /// topic.create_group("g", 1)?;
    /// topic.publish(Bytes::from_static(b"retry me"))?;
    /// let first = topic.poll("g")?.expect("a message");
    /// topic.nack("g", first.id())?;
    /// assert_eq!(topic.redrive("g", 0..u64::MAX)?, 1);
    /// let again = topic.poll("g")?.expect("redriven");
    /// assert_eq!((again.offset, again.attempt), (0, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn redrive(&self, group: &str, offsets: Range<u64>) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .redrive(&self.inner.messages, group, offsets, false)
    }

    /// Deletes `group`'s dead letters with offsets in `offsets`; returns how many.
    ///
    /// # Errors
    ///
    /// As [`redrive`](Self::redrive).
    pub fn purge(&self, group: &str, offsets: Range<u64>) -> Result<u64, StoreError> {
        let _live = self.live()?;
        self.inner
            .groups
            .redrive(&self.inner.messages, group, offsets, true)
    }
}
