//! Topics, the log, and the group calls that are not transitions: creating and deleting
//! topics and groups, publishing, listing, and the reads of every group at once.

use std::ops::Range;

use bytes::Bytes;
use mailroom::group::{ArgumentError, GroupConfig, GroupError, GroupState};
use mailroom::topic::{StartPosition, TopicError, GROUP_NAME_BYTES_MAX};
use mailroom_store::{validate_name, StoreError, TopicIdempotency, TopicRetention};

use super::encoding::encode;
use super::group::{big, unknown_group, unknown_topic};
use super::retention::{limit_columns, RETENTION_COLUMNS};
use super::schema::{create_topic_partition, extend_segments, topic_partition};
use super::waiting::{Mark, Marks};
use deadpool_postgres::Pool;
use tokio_postgres::error::SqlState;

use super::{PgError, Postgres};
use crate::backend::{BackendError, GroupGauges, TopicOffsets};

const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint";

impl Postgres {
    /// Creates `topic` with its own `retention`, its own idempotency window and its
    /// partition of the log; `false` (and nothing changed) if it existed.
    pub(super) async fn create_topic_row(
        &self,
        topic: &str,
        retention: &TopicRetention,
        idempotency: &TopicIdempotency,
    ) -> Result<bool, BackendError> {
        validate_name(topic)?;
        idempotency.check()?;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        let [age, bytes, count] = limit_columns(retention);
        let (window_messages, window_ms) = (
            idempotency.messages_max.map(big),
            idempotency.age_ms_max.map(big),
        );
        let created = transaction
            .query_opt(
                &format!(
                    "INSERT INTO mailroom_topics (name, created_at_ms, retention_age_ms, \
                     retention_bytes, retention_messages, keep_unconsumed, \
                     idempotency_messages, idempotency_age_ms) \
                     VALUES ($1, {NOW_MS}, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (name) DO NOTHING RETURNING id"
                ),
                &[
                    &topic,
                    &age,
                    &bytes,
                    &count,
                    &retention.keep_unconsumed,
                    &window_messages,
                    &window_ms,
                ],
            )
            .await
            .map_err(PgError::from)?;
        let Some(row) = created else {
            return Ok(false);
        };
        let topic_id: i64 = row.get(0);
        transaction
            .batch_execute(&create_topic_partition(topic_id))
            .await
            .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        Ok(true)
    }

    /// Every topic with its offsets and group names, by name.
    pub(super) async fn topic_rows(&self) -> Result<Vec<TopicOffsets>, BackendError> {
        let client = self.client().await?;
        let rows = client
            .query(
                &format!(
                    "SELECT t.name, t.start_offset, t.next_offset, \
                     coalesce(array_agg(g.name ORDER BY g.name) FILTER (WHERE g.name IS NOT NULL), '{{}}'), \
                     {RETENTION_COLUMNS} \
                     FROM mailroom_topics t LEFT JOIN mailroom_groups g ON g.topic_id = t.id \
                     GROUP BY t.id ORDER BY t.name"
                ),
                &[],
            )
            .await
            .map_err(PgError::from)?;
        Ok(rows
            .into_iter()
            .map(|row| TopicOffsets {
                name: row.get(0),
                start: row.get::<_, i64>(1) as u64,
                end: row.get::<_, i64>(2) as u64,
                groups: row.get(3),
                retention: self.retention_state(&row, 4),
                // A database has no per-topic files to be damaged: a topic fails only with
                // the whole connection (BackendHealth::failure).
                failure: None,
            })
            .collect())
    }

    /// One topic's offsets and group names.
    pub(super) async fn topic_row(&self, topic: &str) -> Result<TopicOffsets, BackendError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                &format!(
                    "SELECT t.start_offset, t.next_offset, \
                     coalesce(array_agg(g.name ORDER BY g.name) FILTER (WHERE g.name IS NOT NULL), '{{}}'), \
                     {RETENTION_COLUMNS} \
                     FROM mailroom_topics t LEFT JOIN mailroom_groups g ON g.topic_id = t.id \
                     WHERE t.name = $1 GROUP BY t.id"
                ),
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        Ok(TopicOffsets {
            name: topic.to_owned(),
            start: row.get::<_, i64>(0) as u64,
            end: row.get::<_, i64>(1) as u64,
            groups: row.get(2),
            retention: self.retention_state(&row, 3),
            // A database has no per-topic files to be damaged: a topic fails only with
            // the whole connection (BackendHealth::failure).
            failure: None,
        })
    }

    /// `topic`'s own idempotency window, as created (`None` limits follow the brokers'
    /// default).
    pub(super) async fn own_idempotency(
        &self,
        topic: &str,
    ) -> Result<TopicIdempotency, BackendError> {
        let client = self.client().await?;
        let row = client
            .query_opt(
                "SELECT idempotency_messages, idempotency_age_ms FROM mailroom_topics \
                 WHERE name = $1",
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        Ok(own_window(row.get(0), row.get(1)))
    }

    /// Deletes `topic`: its partition of the log is dropped whole, its groups and dead
    /// letters go with its row. Answers its groups' names.
    pub(super) async fn delete_topic_row(&self, topic: &str) -> Result<Vec<String>, BackendError> {
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        let row = transaction
            .query_opt(
                "SELECT id FROM mailroom_topics WHERE name = $1 FOR UPDATE",
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        let topic_id: i64 = row.get(0);
        let groups: Vec<String> = transaction
            .query(
                "SELECT name FROM mailroom_groups WHERE topic_id = $1 ORDER BY name",
                &[&topic_id],
            )
            .await
            .map_err(PgError::from)?
            .into_iter()
            .map(|row| row.get(0))
            .collect();
        transaction
            .batch_execute(&format!(
                "DROP TABLE {}; DELETE FROM mailroom_topics WHERE id = {topic_id}",
                topic_partition(topic_id)
            ))
            .await
            .map_err(PgError::from)?;
        transaction.commit().await.map_err(PgError::from)?;
        self.cache.lock().retain(|(name, _), _| name != topic);
        Ok(groups)
    }

    /// Publishes `payloads` with consecutive offsets, in one transaction under the
    /// topic row's lock (`docs/scale-out.md`, "Offsets"), shared with the publishes of
    /// the topic that waited behind another (`appends.rs`).
    pub(super) async fn append(
        &self,
        topic: &str,
        payloads: &[Bytes],
    ) -> Result<Range<u64>, BackendError> {
        self.appends.append(topic, payloads).await
    }

    /// Creates `group` on `topic` at `start` with `config`, with the embedded store's
    /// checks and errors.
    pub(super) async fn create_group_row(
        &self,
        topic: &str,
        group: &str,
        start: StartPosition,
        config: GroupConfig,
    ) -> Result<(), BackendError> {
        check_group(group, &config)?;
        let mut client = self.client().await?;
        let transaction = client.transaction().await.map_err(PgError::from)?;
        // FOR SHARE holds publishes off while the start is read.
        let row = transaction
            .query_opt(
                "SELECT id, start_offset, next_offset FROM mailroom_topics \
                 WHERE name = $1 FOR SHARE",
                &[&topic],
            )
            .await
            .map_err(PgError::from)?
            .ok_or_else(|| unknown_topic(topic))?;
        let topic_id: i64 = row.get(0);
        let (first, end) = (row.get::<_, i64>(1) as u64, row.get::<_, i64>(2) as u64);
        let position = match start {
            StartPosition::Earliest => first,
            StartPosition::Latest => end,
            StartPosition::Offset(offset) if (first..=end).contains(&offset) => offset,
            StartPosition::Offset(offset) => {
                return Err(BackendError::Store(StoreError::InvalidArgument {
                    reason: format!(
                        "start must be an offset in the retained log, {first}..={end}, got {offset}"
                    ),
                }))
            }
        };
        let state = GroupState::with_config(config, position)
            .map_err(|error| StoreError::Topic(TopicError::from(error)))?;
        let bytes = encode(&state.snapshot(), 0);
        let inserted = transaction
            .execute(
                "INSERT INTO mailroom_groups (topic_id, name, version, state) \
                 VALUES ($1, $2, 1, $3) ON CONFLICT DO NOTHING",
                &[&topic_id, &group, &bytes],
            )
            .await
            .map_err(PgError::from)?;
        if inserted == 0 {
            return Err(BackendError::Store(StoreError::Topic(
                TopicError::GroupExists {
                    group: group.to_owned(),
                },
            )));
        }
        transaction.commit().await.map_err(PgError::from)?;
        Ok(())
    }

    /// Deletes `group` of `topic` with its dead letters.
    pub(super) async fn delete_group_row(
        &self,
        topic: &str,
        group: &str,
    ) -> Result<(), BackendError> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "WITH t AS (SELECT id FROM mailroom_topics WHERE name = $1), \
                 d AS (DELETE FROM mailroom_groups g USING t \
                       WHERE g.topic_id = t.id AND g.name = $2 RETURNING 1) \
                 SELECT (SELECT count(*) FROM t), (SELECT count(*) FROM d)",
                &[&topic, &group],
            )
            .await
            .map_err(PgError::from)?;
        self.cache
            .lock()
            .remove(&(topic.to_owned(), group.to_owned()));
        match (row.get::<_, i64>(0), row.get::<_, i64>(1)) {
            (0, _) => Err(unknown_topic(topic)),
            (_, 0) => Err(unknown_group(group)),
            _ => Ok(()),
        }
    }

    /// The lag and counters of every group, read from the committed states.
    pub(super) async fn gauges(&self) -> Result<Vec<GroupGauges>, BackendError> {
        let mut gauges = Vec::new();
        for topic in self.topic_rows().await? {
            for group in &topic.groups {
                let state = self.read_state(&topic.name, group).await?;
                gauges.push(GroupGauges {
                    topic: topic.name.clone(),
                    group: group.clone(),
                    lag: state.0.lag(topic.end),
                    counters: state.0.counters(),
                });
            }
        }
        Ok(gauges)
    }
}

/// A topic's own window from its row's two columns (NULL follows the default).
pub(super) fn own_window(messages: Option<i64>, age_ms: Option<i64>) -> TopicIdempotency {
    TopicIdempotency {
        messages_max: messages.map(|value| value.max(0) as u64),
        age_ms_max: age_ms.map(|value| value.max(0) as u64),
    }
}

/// The embedded store's checks of a new group's name and settings, with its errors.
fn check_group(group: &str, config: &GroupConfig) -> Result<(), BackendError> {
    let invalid =
        |error| BackendError::Store(StoreError::Topic(TopicError::InvalidArgument(error)));
    if group.is_empty() {
        return Err(invalid(ArgumentError::LengthOutOfRange {
            field: "group",
            min: 1,
            max: GROUP_NAME_BYTES_MAX,
            got: 0,
        }));
    }
    config
        .check()
        .map_err(|error| StoreError::Topic(TopicError::from(error)))?;
    if config.max_attempts == 0 {
        return Err(BackendError::Store(StoreError::Topic(TopicError::from(
            GroupError::ZeroMaxAttempts,
        ))));
    }
    validate_name(group)?;
    Ok(())
}

/// A publish as one statement, so one round trip and one commit: the offsets taken under
/// the topic row's lock, the rows inserted, and the topic's waiting mark read under that
/// lock. It fails with `check_violation` ("no partition ... found for row") when the
/// offsets reach past the topic's segments, and nothing is written then.
const APPEND: &str = "WITH t AS (UPDATE mailroom_topics \
       SET next_offset = next_offset + $2, bytes = bytes + $3 WHERE name = $1 \
       RETURNING id, next_offset - $2 AS first, waiting_until_ms, waiting_broker, \
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now), \
     i AS (INSERT INTO mailroom_messages (topic_id, \"offset\", published_at_ms, payload) \
       SELECT t.id, t.first + m.n - 1, t.now, m.p \
       FROM t, unnest($4::bytea[]) WITH ORDINALITY AS m(p, n)) \
     SELECT first, waiting_until_ms, waiting_broker, now FROM t";

/// Publishes `payloads` to `topic` with consecutive offsets, in one transaction under the
/// topic row's lock (`docs/scale-out.md`, "Offsets"): the body of
/// [`Postgres::append`], shared with the publish stream's task. The topic's waiting mark,
/// read under that lock, goes to `marks` once the publish has committed.
///
/// One statement ([`APPEND`]) when the topic's segments hold the new offsets; else (once
/// per `SEGMENT_OFFSETS` messages, and for an empty publish) a transaction that makes
/// the segments first.
pub(super) async fn append(
    pool: &Pool,
    marks: &Marks,
    topic: &str,
    payloads: &[Bytes],
) -> Result<Range<u64>, BackendError> {
    let count = payloads.len() as i64;
    let bytes: i64 = payloads.iter().map(|payload| payload.len() as i64).sum();
    let mut client = pool.get().await.map_err(PgError::from)?;
    if !payloads.is_empty() {
        if let Some(offsets) = append_in_one(&client, marks, topic, payloads).await? {
            return Ok(offsets);
        }
    }

    let transaction = client.transaction().await.map_err(PgError::from)?;
    let take = transaction
        .prepare_cached(
            "UPDATE mailroom_topics SET next_offset = next_offset + $2, bytes = bytes + $3 \
                 WHERE name = $1 RETURNING id, next_offset - $2, segments_end, \
                 waiting_until_ms, waiting_broker, \
                 (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
        )
        .await
        .map_err(PgError::from)?;
    let row = transaction
        .query_opt(&take, &[&topic, &count, &bytes])
        .await
        .map_err(PgError::from)?
        .ok_or_else(|| unknown_topic(topic))?;
    let topic_id: i64 = row.get(0);
    let first = row.get::<_, i64>(1) as u64;
    let segments_end = row.get::<_, i64>(2) as u64;
    let end = first + payloads.len() as u64;
    if payloads.is_empty() {
        return Ok(first..first);
    }
    if end > segments_end {
        // Rare (once per SEGMENT_OFFSETS messages).
        transaction
            .batch_execute(&extend_segments(topic_id, segments_end, end))
            .await
            .map_err(PgError::from)?;
    }
    let insert = transaction
        .prepare_cached(&format!(
            "INSERT INTO mailroom_messages (topic_id, \"offset\", published_at_ms, payload) \
                 SELECT $1, $2 + n - 1, {NOW_MS}, p \
                 FROM unnest($3::bytea[]) WITH ORDINALITY AS m(p, n)"
        ))
        .await
        .map_err(PgError::from)?;
    let bodies: Vec<&[u8]> = payloads.iter().map(|payload| payload.as_ref()).collect();
    transaction
        .execute(&insert, &[&topic_id, &big(first), &bodies])
        .await
        .map_err(PgError::from)?;
    transaction.commit().await.map_err(PgError::from)?;
    marks.observe(topic, Mark::in_row(&row, 3, 4, 5));
    Ok(first..end)
}

/// [`APPEND`]: answers the offsets taken, or `None` when the topic's segments do not hold
/// them all (nothing was written then).
async fn append_in_one(
    client: &deadpool_postgres::Object,
    marks: &Marks,
    topic: &str,
    payloads: &[Bytes],
) -> Result<Option<Range<u64>>, BackendError> {
    let count = payloads.len() as i64;
    let bytes: i64 = payloads.iter().map(|payload| payload.len() as i64).sum();
    let bodies: Vec<&[u8]> = payloads.iter().map(|payload| payload.as_ref()).collect();
    let append = client.prepare_cached(APPEND).await.map_err(PgError::from)?;
    let row = match client
        .query_opt(&append, &[&topic, &count, &bytes, &bodies])
        .await
    {
        Ok(Some(row)) => row,
        Ok(None) => return Err(unknown_topic(topic)),
        Err(error) if error.code() == Some(&SqlState::CHECK_VIOLATION) => return Ok(None),
        Err(error) => return Err(PgError::from(error).into()),
    };
    let mark = Mark::in_row(&row, 1, 2, 3);
    marks.observe(topic, mark);
    let first = row.get::<_, i64>(0) as u64;
    Ok(Some(first..first + payloads.len() as u64))
}
