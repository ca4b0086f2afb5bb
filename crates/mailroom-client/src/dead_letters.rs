//! A group's dead letters: read one page at a time or all, redriven to this group, or
//! purged.

use std::ops::Range;

use http::Method;
use mailroom_api::dead_letters::{DeadLetterQuery, DeadLetters, DeadLettersTaken, OffsetRange};

use crate::{Client, ClientError, DeadLetter};

/// The most dead letters the server puts in one page.
pub use mailroom_api::limits::DEAD_LETTERS_PAGE_MAX;

/// One page of a group's dead letters, by ascending offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterPage {
    /// The dead letters of this page.
    pub dead_letters: Vec<DeadLetter>,
    /// The `from` of the next page; `None` when this page is the last.
    pub next: Option<u64>,
}

impl Client {
    /// One page of the group's dead letters: at most `limit` (1 to
    /// [`DEAD_LETTERS_PAGE_MAX`]) with offsets from `from` on. Pass the page's `next` as
    /// the following call's `from` until it is `None`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// let client = mailroom_client::Client::new("http://127.0.0.1:7070")?;
    /// let mut from = Some(0);
    /// while let Some(start) = from {
    ///     let page = client.dead_letters_page("orders", "billing", start, 100).await?;
    ///     println!("{} dead letters", page.dead_letters.len());
    ///     from = page.next;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` (400) for a `limit` out of range, `unknown_topic` or
    /// `unknown_group` (404), or a transport error.
    pub async fn dead_letters_page(
        &self,
        topic: &str,
        group: &str,
        from: u64,
        limit: usize,
    ) -> Result<DeadLetterPage, ClientError> {
        let path = Self::group_path(topic, group, &["dead-letters"])?;
        let query = DeadLetterQuery {
            from: Some(from),
            limit: Some(limit),
        };
        let request = self.request(Method::GET, &path).query(&query);
        let page: DeadLetters = self.json(request).await?;
        let dead_letters = page
            .dead_letters
            .into_iter()
            .map(DeadLetter::try_from)
            .collect::<Result<_, ClientError>>()?;
        Ok(DeadLetterPage {
            dead_letters,
            next: page.next,
        })
    }

    /// The group's dead letters, by ascending offset: every page, walked with
    /// [`dead_letters_page`](Self::dead_letters_page).
    ///
    /// # Errors
    /// `unknown_topic` or `unknown_group` (404), or a transport error.
    pub async fn dead_letters(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<Vec<DeadLetter>, ClientError> {
        let mut letters = Vec::new();
        let mut from = Some(0);
        while let Some(start) = from {
            let page = self
                .dead_letters_page(topic, group, start, DEAD_LETTERS_PAGE_MAX)
                .await?;
            letters.extend(page.dead_letters);
            from = page.next;
        }
        Ok(letters)
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
        let request = self.request(Method::POST, &path).json(&body);
        let taken: DeadLettersTaken = self.json(request).await?;
        Ok(taken.count)
    }
}
