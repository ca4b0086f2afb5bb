//! What a poll plans with, read once: the sizes and key hashes of every message its plan
//! may look at, and with them the whole rows (payload and metadata) of the messages it
//! will most likely hand out, so that the call's second pipeline reads payloads only for
//! the few deliveries the guess missed.
//!
//! Which messages a plan may look at follows from `mailroom::group`'s window rules
//! (`keys.rs`, "The window"): the group's open slots; the fresh messages from
//! `next_fresh` while below `position + W` (acks in the same call move the position at
//! most up to `next_fresh`, so `[next_fresh, next_fresh + W)` covers them); and keyed
//! fresh messages up to `position + keyed span`. Only *keyed* messages are read past the
//! first W, through the partial index on keyed rows (migration 4), so a log without keys
//! costs no more than W rows per poll. A message not read answers the planner's key
//! lookup as one without a key, which is what every unread message of that range is.
//!
//! The window's slots from the position are read as one range, except where it starts:
//! the slots the same call acks before its poll plans are left out from its bottom
//! ([`PollWindow::acks`]), so a consumer that acks each round with its next poll reads
//! only the new messages' rows, not its finished round's as well (half the rows at
//! prefetch 64). That is exact because such an ack cannot be refused: it names a delivery
//! in flight under that attempt, with no lease to run out (a slot with a lease is read,
//! since its lease may end before the call's clock is read), and no nack in the call
//! comes before it (a call with nacks leaves nothing out). Such a slot is finished
//! before the poll plans, and the plan never looks at a finished slot.
//!
//! The rows read whole are the lowest `min(max, W)` ready slots and the first
//! `min(max, W)` fresh messages, each if its payload is at most the poll's byte cap over
//! that count (so a poll of large messages does not move more than it may hand out);
//! the plan itself still decides, from the sizes, what it hands out.

use std::collections::HashMap;

use bytes::Bytes;
use deadpool_postgres::{GenericClient, Object};
use mailroom::group::{key_hash, DeliveryId, GroupState, SlotPhase, KEYED_WINDOW_SPAN};
use mailroom::topic::Message;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use super::deliveries::POLL_BATCH_BYTES_MAX;
use super::group::big;
use super::metadata::message_of;
use super::schema::topic_partition;
use super::topic_statements::{offset_bounds, prepare_for_topic};
use crate::backend::BackendError;

/// The window's rows of topic `topic_id`: `offset, size, taken, payload,
/// published_at_ms, key, headers, idempotency_key`, the payload and metadata only where
/// `taken` (else `NULL`): a wanted row whose payload is at most `$8`, the poll's byte cap
/// over the rows it wants, so that the rows taken whole never sum past the cap (a larger
/// message is read in the second pipeline if the plan hands it out). A per-row bound, not
/// a running sum: the sum would sort the rows, payloads and all, for every poll.
///
/// It names the topic's own partition and runs with its generic plan: it is read only
/// inside a group call's transaction, which forces every statement's
/// ([`super::topic_statements::BEGIN_GENERIC`]).
///
/// The window is three disjoint parts, each its own index range of the partition: the
/// redriven slots (`= ANY($2)`, bounded by `[$10, $11)`, their lowest and highest), the
/// range from the slots to the plain window's end (`[$9, $4)`) and the keyed messages
/// past it (`[$4, $5)`, through the keyed index). As one scan with the three in an `OR`,
/// a generic plan made while the topic's segment held a few dozen rows and had no
/// statistics (new segments, until autovacuum first analyzes them) scanned the index by
/// `topic_id` alone, the one condition that plan thought selective, and so read the whole
/// segment on every poll until the next analyze: 6.2 ms instead of 0.15 at 40,064 rows.
/// Split, each part's scan has its range as its index condition whatever the plan was
/// made on, and its bounds keep a small table's plan from reading more than the range
/// ([`super::topic_statements`], "Plans made on small segments").
///
/// `taken` is worked out once a row, in a subquery that `OFFSET 0` keeps the planner from
/// pulling up: pulled up (as a `LATERAL` was), its expression is copied into each of the
/// four places that use it and evaluated four times a row. Under `EXPLAIN ANALYZE` that
/// made the scan four times as slow (0.365 against 0.078 ms for 256 rows); in a broker's
/// run, where sending the rows costs most, the statement took 4% less (pg_stat_statements:
/// 716 against 684 µs a call at 256 rows, 168 against 161 at 64).
pub(super) fn window_rows(topic_id: i64) -> String {
    let columns = format!(
        "SELECT \"offset\", payload, published_at_ms, key, headers, idempotency_key FROM {}",
        topic_partition(topic_id)
    );
    format!(
        "SELECT w.\"offset\", octet_length(w.payload), w.taken, \
         CASE WHEN w.taken THEN w.payload END, w.published_at_ms, w.key, \
         CASE WHEN w.taken THEN w.headers::text END, \
         CASE WHEN w.taken THEN w.idempotency_key END \
         FROM (SELECT m.\"offset\", m.payload, m.published_at_ms, m.key, m.headers, \
           m.idempotency_key, (m.\"offset\" = ANY($6) \
             OR (m.\"offset\" >= $3 AND m.\"offset\" < $7)) \
             AND octet_length(m.payload) <= $8::bigint AS taken \
           FROM ({columns} WHERE topic_id = $1 AND \"offset\" >= $10 AND \"offset\" < $11 \
               AND \"offset\" = ANY($2) \
             UNION ALL {columns} WHERE topic_id = $1 AND \"offset\" >= $9 AND \"offset\" < $4 \
             UNION ALL {columns} WHERE topic_id = $1 AND key IS NOT NULL \
               AND \"offset\" >= $4 AND \"offset\" < $5) m \
           OFFSET 0) AS w"
    )
}

/// The window statement of `topic_id`, prepared on `client` (once per connection).
pub(super) async fn prepare_window(
    client: &Object,
    topic_id: i64,
) -> Result<Statement, tokio_postgres::Error> {
    prepare_for_topic(client, &client.statement_cache, &window_rows(topic_id)).await
}

/// What a call's poll reads its window for.
#[derive(Debug, Clone, Copy)]
pub(super) struct PollWindow<'a> {
    /// The most deliveries the poll may hand out.
    pub max: usize,
    /// The deliveries the call acks before its poll plans, when no nack in the call comes
    /// before them (else none): the window leaves out the slots these finish for sure.
    pub acks: &'a [DeliveryId],
}

impl PollWindow<'static> {
    /// The window of a poll of up to `max` deliveries that settles nothing first.
    pub(super) fn of(max: usize) -> PollWindow<'static> {
        PollWindow { max, acks: &[] }
    }
}

/// The messages a poll of a state may look at (see the module docs), below the log's end.
///
/// The slots of the window are read as the range from the position on (with the few
/// finished ones among them, which the plan never looks at): one index range is far
/// cheaper for the database than a lookup per slot.
pub(super) struct Window {
    /// The open slots' offsets.
    slots: Vec<i64>,
    /// The open slots below the position (redriven dead letters).
    redriven: Vec<i64>,
    /// Where the range of the window's slots starts: the lowest open slot from the
    /// group's position that the call's acks do not finish for sure (`fresh` if none).
    slots_from: u64,
    /// The ready slots whose rows are wanted whole (the lowest `take` of them).
    ready: Vec<i64>,
    /// `next_fresh`: the first message never delivered.
    fresh: u64,
    /// The end of the fresh messages read whatever their key (`fresh + W`).
    plain_to: u64,
    /// The end of the keyed fresh messages read (`fresh + keyed span`).
    keyed_to: u64,
    /// The end of the fresh messages wanted whole.
    take_to: u64,
    /// The largest payload read whole: the byte cap over the number of rows wanted.
    take_bytes: u64,
}

/// What a window's read found: the planner's sizes and key hashes, and the rows read
/// whole, by offset.
#[derive(Default)]
pub(super) struct WindowRead {
    /// Payload sizes of the messages read.
    pub sizes: HashMap<u64, usize>,
    /// The key hashes of those that have a key.
    pub keys: HashMap<u64, u64>,
    rows: Vec<Row>,
    taken: HashMap<u64, usize>,
}

impl Window {
    /// The window of `state` below `log_end` (`u64::MAX`: not known yet) for `poll`.
    pub(super) fn of(state: &GroupState, log_end: u64, poll: PollWindow<'_>) -> Window {
        let w = u64::from(state.config().max_in_flight);
        let take = usize::try_from(w).unwrap_or(usize::MAX).min(poll.max);
        let position = state.position();
        let fresh = state.next_fresh();
        // The slots the call's acks finish whatever the clock says: those the state
        // machine's own ack check passes at the end of time, which only a delivery in
        // flight under that attempt and without a lease does.
        let mut finished: Vec<u64> = poll
            .acks
            .iter()
            .filter(|&&id| state.plan_ack(id, u64::MAX).is_ok())
            .map(|id| id.offset)
            .collect();
        finished.sort_unstable();
        let mut slots = Vec::new();
        let mut redriven = Vec::new();
        let mut ready = Vec::new();
        let mut slots_from = None;
        for slot in state.slots() {
            slots.push(big(slot.offset));
            if slot.offset < position {
                redriven.push(big(slot.offset));
            } else if slots_from.is_none() && finished.binary_search(&slot.offset).is_err() {
                slots_from = Some(slot.offset);
            }
            if matches!(slot.phase, SlotPhase::Ready { .. }) && ready.len() < take {
                ready.push(big(slot.offset));
            }
        }
        let keyed_span = if w == 1 {
            1
        } else {
            w * u64::from(KEYED_WINDOW_SPAN)
        };
        let take_to = fresh.saturating_add(take as u64).min(log_end);
        let wanted = ready.len() as u64 + take_to.saturating_sub(fresh);
        Window {
            slots,
            redriven,
            slots_from: slots_from.unwrap_or(fresh),
            ready,
            fresh,
            // Never below `fresh`: the range from the position holds the slots too.
            plain_to: fresh.saturating_add(w).min(log_end).max(fresh),
            keyed_to: fresh.saturating_add(keyed_span).min(log_end),
            take_to,
            take_bytes: POLL_BATCH_BYTES_MAX as u64 / wanted.max(1),
        }
    }

    /// Reads the window's rows ([`window_rows`], prepared by [`prepare_window`]), in a
    /// group call's transaction (begun with generic plans forced).
    pub(super) async fn read(
        &self,
        client: &impl GenericClient,
        statement: &Statement,
        topic_id: i64,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let (redriven_from, redriven_to) = offset_bounds(&self.redriven);
        let params: [&(dyn ToSql + Sync); 11] = [
            &topic_id,
            &self.redriven,
            &big(self.fresh),
            &big(self.plain_to),
            &big(self.keyed_to),
            &self.ready,
            &big(self.take_to),
            &big(self.take_bytes),
            &big(self.slots_from),
            &redriven_from,
            &redriven_to,
        ];
        client.query(statement, &params).await
    }

    /// Whether `offset` is in this window (a slot, or a fresh message it reads).
    fn holds(&self, offset: u64, keyed: bool) -> bool {
        let end = if keyed { self.keyed_to } else { self.plain_to };
        // `slots` is by offset, as `GroupState::slots` walks them.
        (offset >= self.fresh && offset < end) || self.slots.binary_search(&big(offset)).is_ok()
    }

    /// What the rows [`read`](Self::read) answered hold for this window: a read made for
    /// a wider one (before the log's end was known) also found messages published after
    /// it, which this call must not see.
    pub(super) fn found(&self, rows: Vec<Row>) -> WindowRead {
        let mut read = WindowRead::default();
        for row in rows {
            let offset = row.get::<_, i64>(0) as u64;
            let key: Option<&[u8]> = row.get(5);
            if !self.holds(offset, key.is_some()) {
                continue;
            }
            read.sizes
                .insert(offset, row.get::<_, i32>(1).max(0) as usize);
            if let Some(key) = key {
                read.keys.insert(offset, key_hash(key));
            }
            if row.get::<_, bool>(2) {
                read.taken.insert(offset, read.rows.len());
                read.rows.push(row);
            }
        }
        read
    }
}

impl WindowRead {
    /// Whether the message at `offset` was read whole.
    pub(super) fn has(&self, offset: u64) -> bool {
        self.taken.contains_key(&offset)
    }

    /// The message at `offset` if it was read whole.
    ///
    /// # Errors
    /// A stored key or headers that do not decode.
    pub(super) fn message(&self, offset: u64) -> Option<Result<Message<Bytes>, BackendError>> {
        let &index = self.taken.get(&offset)?;
        Some(message_of(&self.rows[index], 3))
    }
}
