//! Reading a topic's log without a group on PostgreSQL: a page of message rows by offset
//! (cut by the rules of `backend::log_reads`), and the offset of a publish time.
//!
//! Neither takes a lock or writes: a read sees what was committed. The topic row is read
//! first; every message below its `next_offset` was committed with it (one transaction
//! appends the rows and moves `next_offset`), so the page is read below that end and
//! agrees with it.

use bytes::Bytes;
use mailroom::topic::Message;
use tokio_postgres::Row;

use super::group::{big, unknown_topic};
use super::{metadata, PgError, Postgres};
use crate::backend::log_reads::check_from;
use crate::backend::{BackendError, LogPage};

/// One page of message rows from `$2` below `$3`: at most `$4` rows, stopping before the
/// row whose payload would take the running sum past `$5` bytes, the first row always.
/// The running sum is a window over the offset index, so rows past the page are not read.
const PAGE: &str = "SELECT \"offset\", published_at_ms, key, headers::text, payload FROM ( \
     SELECT \"offset\", published_at_ms, key, headers, payload, \
     row_number() OVER running AS n, sum(octet_length(payload)) OVER running AS bytes \
     FROM mailroom_messages WHERE topic_id = $1 AND \"offset\" >= $2 AND \"offset\" < $3 \
     WINDOW running AS (ORDER BY \"offset\") ORDER BY \"offset\" LIMIT $4) page \
     WHERE n = 1 OR bytes <= $5 ORDER BY \"offset\"";

/// A topic's id and its retained range.
struct TopicRange {
    id: i64,
    start: u64,
    end: u64,
}

impl Postgres {
    /// The topic row's id, start and end.
    async fn topic_range(
        &self,
        client: &deadpool_postgres::Object,
        topic: &str,
    ) -> Result<TopicRange, BackendError> {
        let row = client
            .query_opt(
                "SELECT id, start_offset, next_offset FROM mailroom_topics WHERE name = $1",
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        Ok(TopicRange {
            id: row.get(0),
            start: row.get::<_, i64>(1) as u64,
            end: row.get::<_, i64>(2) as u64,
        })
    }

    /// A page of `topic`'s log from `from` (see [`LogPage`]).
    pub(super) async fn log_page(
        &self,
        topic: &str,
        from: u64,
        limit: usize,
        bytes_max: usize,
    ) -> Result<LogPage, BackendError> {
        let client = self.client().await?;
        let range = self.topic_range(&client, topic).await?;
        check_from(from, range.end)?;
        let first = from.max(range.start);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let bytes_max = i64::try_from(bytes_max).unwrap_or(i64::MAX);
        let rows = client
            .query(
                PAGE,
                &[&range.id, &big(first), &big(range.end), &limit, &bytes_max],
            )
            .await
            .map_err(PgError::from)?;
        let messages = rows.iter().map(message_of).collect::<Result<_, _>>()?;
        Ok(LogPage {
            messages,
            first,
            end: range.end,
        })
    }

    /// The first retained offset of `topic` published at or after `time_ms`, or its end:
    /// a binary search over offsets by primary key, about `log2(len)` point reads,
    /// taking publish times as non-decreasing in offset order (the embedded store's
    /// `offset_at_time` has the same rule and caveat).
    pub(super) async fn offset_of_time(
        &self,
        topic: &str,
        time_ms: u64,
    ) -> Result<u64, BackendError> {
        let client = self.client().await?;
        let range = self.topic_range(&client, topic).await?;
        let statement = client
            .prepare(
                "SELECT published_at_ms FROM mailroom_messages \
                 WHERE topic_id = $1 AND \"offset\" = $2",
            )
            .await
            .map_err(PgError::from)?;
        let (mut low, mut high) = (range.start, range.end);
        // Invariant: every offset below `low` is before `time_ms` (or gone), and the
        // answer is at most `high`.
        while low < high {
            let middle = low + (high - low) / 2;
            let row = client
                .query_opt(&statement, &[&range.id, &big(middle)])
                .await
                .map_err(PgError::from)?;
            match row.map(|row| row.get::<_, i64>(0) as u64) {
                Some(at) if at >= time_ms => high = middle,
                // Before the time, or removed meanwhile.
                _ => low = middle + 1,
            }
        }
        Ok(low)
    }
}

/// A message row (`offset, published_at_ms, key, headers::text, payload`) as a message.
fn message_of(row: &Row) -> Result<(u64, Message<Bytes>), BackendError> {
    let offset = row.get::<_, i64>(0) as u64;
    let metadata = metadata::decode(row.get(2), row.get(3), None)
        .map_err(|error| BackendError::Internal(format!("message {offset}: {error}")))?;
    let payload = Bytes::from(row.get::<_, Vec<u8>>(4));
    let published_at_ms = row.get::<_, i64>(1) as u64;
    Ok((
        offset,
        Message::new(payload, Some(published_at_ms), metadata),
    ))
}
