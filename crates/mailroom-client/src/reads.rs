//! Reading a topic's log without a group ([`Client::read`]) and seeking a group by
//! time ([`Client::seek_to_time`]).

use std::collections::BTreeMap;

use bytes::Bytes;
use http::Method;
use mailroom_api::groups::{GroupSeeked, SeekGroup};
use mailroom_api::reads::{ReadMessage, ReadPage, ReadQuery};

use crate::types::payload_bytes;
use crate::{Client, ClientError};

pub use mailroom_api::limits::{READ_PAGE_DEFAULT, READ_PAGE_MAX};

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadFrom {
    /// At the oldest retained message.
    #[default]
    Earliest,
    /// At this offset (below the retained start: at the start, which the page's
    /// [`first`](LogPage::first) then says).
    Offset(u64),
    /// At the first message published at or after this time, Unix milliseconds.
    Time(u64),
}

/// One message read from the log, with its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogMessage {
    /// Its offset.
    pub offset: u64,
    /// Its bytes.
    pub payload: Bytes,
    /// Its key, if it has one.
    pub key: Option<String>,
    /// Its headers by name (empty when it has none).
    pub headers: BTreeMap<String, String>,
    /// When the broker published it, Unix milliseconds.
    pub published_at_ms: u64,
}

impl TryFrom<ReadMessage> for LogMessage {
    type Error = ClientError;

    fn try_from(body: ReadMessage) -> Result<LogMessage, ClientError> {
        Ok(LogMessage {
            offset: body.offset,
            payload: payload_bytes(body.payload, body.payload_base64)?,
            key: body.key,
            headers: body.headers.unwrap_or_default(),
            published_at_ms: body.published_at_ms,
        })
    }
}

/// One page of a topic's log, by ascending offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    /// The messages (empty at the end of the log).
    pub messages: Vec<LogMessage>,
    /// Where the page starts: the offset asked for, or the oldest retained one when that
    /// was below it (the messages between were removed by retention).
    pub first: u64,
    /// The offset to read from next.
    pub next: u64,
    /// The log's end when the page was read; `next == end` means the page reached it.
    pub end: u64,
}

impl Client {
    /// Reads up to `limit` messages (1 to [`READ_PAGE_MAX`]) of `topic`'s log from
    /// `from`, without a group: nothing on the server changes. At the end of the log it
    /// waits up to `wait_ms` (0 to 30,000) for a publish. Read on from the page's `next`.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), mailroom_client::ClientError> {
    /// use mailroom_client::{Client, ReadFrom};
    /// let client = Client::new("http://127.0.0.1:7070")?;
    /// let mut from = ReadFrom::Earliest;
    /// loop {
    ///     let page = client.read("orders", from, 100, 0).await?;
    ///     for message in &page.messages {
    ///         println!("{} {:?}", message.offset, message.payload);
    ///     }
    ///     if page.next == page.end {
    ///         break;
    ///     }
    ///     from = ReadFrom::Offset(page.next);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `invalid_argument` (400) for an offset past the end of the log or a `limit` or
    /// `wait_ms` out of range, `unknown_topic` (404), `too_many_long_polls` (429), or a
    /// transport error.
    pub async fn read(
        &self,
        topic: &str,
        from: ReadFrom,
        limit: usize,
        wait_ms: u64,
    ) -> Result<LogPage, ClientError> {
        let mut query = ReadQuery {
            limit: Some(limit),
            wait_ms: (wait_ms > 0).then_some(wait_ms),
            ..ReadQuery::default()
        };
        match from {
            ReadFrom::Earliest => {}
            ReadFrom::Offset(offset) => query.from = Some(offset),
            ReadFrom::Time(time_ms) => query.from_time_ms = Some(time_ms),
        }
        let path = Self::topic_path(topic, &["messages"])?;
        let call = self.request(Method::GET, &path).query(&query);
        // The server may hold the request `wait_ms` before it starts answering.
        let limit = self.timeouts().long_poll(wait_ms);
        let page: ReadPage = Self::decode(&self.send_within(call, limit).await?)?;
        let messages = page
            .messages
            .into_iter()
            .map(LogMessage::try_from)
            .collect::<Result<_, _>>()?;
        Ok(LogPage {
            messages,
            first: page.first,
            next: page.next,
            end: page.end,
        })
    }

    /// Moves `group` to the first retained message published at or after `time_ms`
    /// (Unix ms; the end of the log if none is), as [`seek`](Self::seek) does to an
    /// offset; returns its new position.
    ///
    /// # Errors
    /// As [`seek`](Self::seek).
    pub async fn seek_to_time(
        &self,
        topic: &str,
        group: &str,
        time_ms: u64,
    ) -> Result<u64, ClientError> {
        let body = SeekGroup {
            time_ms: Some(time_ms),
            ..SeekGroup::default()
        };
        let path = Self::group_path(topic, group, &["seek"])?;
        let request = self.request(Method::POST, &path).json(&body);
        let seeked: GroupSeeked = self.json(request).await?;
        Ok(seeked.position)
    }
}
