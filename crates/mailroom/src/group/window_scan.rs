//! The scan of a group's window that one batch poll keeps from one delivery to the next:
//! [`WindowScan`].
//!
//! Choosing a delivery with keys (see `keys.rs`) walks the window in order, collecting
//! the keys that are busy for everything above: the keys in flight, then each key met at
//! a ready slot. Within one batch the state changes between two plans only by the
//! delivery just planned, and that delivery changes nothing the walk below it saw: the
//! slot it took was the first deliverable one, its key is in the busy set already (or is
//! added), and a fresh delivery appends only held slots whose keys are busy. So the next
//! plan of the batch resumes the walk right after it, with the same busy set, instead of
//! starting over: a batch is linear in the window instead of quadratic.
//!
//! The scan remembers what it planned on (position, deliveries in flight, log end, time,
//! the offset it chose) and starts over when the state is not the one it left plus that
//! one delivery (after an expiry, or with a home that did not apply the delivery). In
//! builds with debug assertions every resumed answer is checked against a walk from the
//! start.

use super::keys::{Busy, KeyLookup};
use super::state::GroupState;
use super::types::{PollStep, Slot, SlotPhase};

/// What one batch poll's planning learned about the window, kept across its deliveries
/// (see [`GroupState::plan_poll_new_scanned`]). A new one knows nothing; a batch starts
/// with a new one.
///
/// # Example
///
/// ```
/// use mailroom::group::{GroupConfig, GroupState, PollStep, WindowScan};
///
/// let keys = [Some(1), Some(1), Some(2)];
/// let mut lookup = |offset: u64| keys[offset as usize];
/// let config = GroupConfig::new(3).with_max_in_flight(4);
/// let mut group = GroupState::with_config(config, 0).unwrap();
/// let mut scan = WindowScan::default();
/// let mut offsets = Vec::new();
/// while let PollStep::Deliver(new) = group.plan_poll_new_scanned(3, 0, &mut lookup, &mut scan) {
///     group.apply_delivery(new, None).unwrap();
///     offsets.push(new.id.offset);
/// }
/// // Offset 1 waits for offset 0, of the same key.
/// assert_eq!(offsets, [0, 2]);
/// ```
#[derive(Debug, Default)]
pub struct WindowScan {
    walk: Option<Walk>,
}

/// A walk of the window, stopped after the delivery it chose.
#[derive(Debug)]
struct Walk {
    /// Busy keys for every slot from `cursor` on.
    busy: Busy,
    /// The earliest delay end of a waiting keyed slot met so far.
    wait: Option<u64>,
    cursor: Cursor,
    /// What the walk planned on, and the delivery it chose.
    position: u64,
    in_flight: u32,
    log_end: u64,
    now_ms: u64,
    chosen: u64,
}

/// Where a walk goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cursor {
    /// At the redriven slots from this offset.
    Redriven(u64),
    /// At the window slot of this index.
    Window(usize),
    /// At this fresh offset.
    Fresh(u64),
}

impl WindowScan {
    /// Whether a plan at `now_ms` against `log_end` on `state` can resume the walk:
    /// `state` is the one it planned on plus the delivery it chose.
    pub(super) fn resumes(&self, state: &GroupState, log_end: u64, now_ms: u64) -> bool {
        let Some(walk) = &self.walk else {
            return false;
        };
        let fresh_ok = match walk.cursor {
            Cursor::Fresh(offset) => offset == state.next_fresh(),
            _ => true,
        };
        fresh_ok
            && walk.position == state.position
            && walk.in_flight.checked_add(1) == Some(state.in_flight)
            && walk.log_end == log_end
            && walk.now_ms == now_ms
            && state
                .slot(walk.chosen)
                .is_some_and(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
    }
}

impl GroupState {
    /// The offset to deliver next with keys (see the module docs of `keys.rs`), resuming
    /// the walk of `scan` where it can (see `window_scan.rs`).
    pub(super) fn next_candidate_scanned(
        &self,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
        scan: &mut WindowScan,
    ) -> Result<u64, PollStep> {
        let resumed = scan.resumes(self, log_end, now_ms);
        let mut walk = match scan.walk.take() {
            Some(walk) if resumed => walk,
            _ => self.start_walk(log_end, now_ms, keys),
        };
        let found = self.walk_on(&mut walk, log_end, now_ms, keys);
        #[cfg(debug_assertions)]
        if resumed {
            let mut again = self.start_walk(log_end, now_ms, keys);
            let from_start = self.walk_on(&mut again, log_end, now_ms, keys);
            assert_eq!(found, from_start, "a resumed walk must choose as a new one");
        }
        if let Ok(chosen) = found {
            walk.chosen = chosen;
            scan.walk = Some(walk);
        }
        found
    }

    /// A walk from the start of the window: the keys in flight are busy.
    fn start_walk(&self, log_end: u64, now_ms: u64, keys: &mut dyn KeyLookup) -> Walk {
        // With every slot in flight there is nothing ready to visit.
        let cursor = if self.in_flight as usize == self.redriven.len() + self.window.len() {
            Cursor::Fresh(self.next_fresh())
        } else {
            Cursor::Redriven(0)
        };
        Walk {
            busy: self.in_flight_keys(keys),
            wait: None,
            cursor,
            position: self.position,
            in_flight: self.in_flight,
            log_end,
            now_ms,
            chosen: 0,
        }
    }

    /// Walks on from `walk.cursor`: the ready slots, then the fresh messages, and stops
    /// at the first deliverable one (left as the cursor's last visit) or the end.
    fn walk_on(
        &self,
        walk: &mut Walk,
        log_end: u64,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
    ) -> Result<u64, PollStep> {
        if let Cursor::Redriven(from) = walk.cursor {
            for (&offset, slot) in self.redriven.range(from..) {
                if let Some(found) = self.visit(walk, slot, now_ms, keys) {
                    walk.cursor = Cursor::Redriven(offset + 1);
                    return found;
                }
            }
            walk.cursor = Cursor::Window(0);
        }
        if let Cursor::Window(from) = walk.cursor {
            for (index, slot) in self.window.iter().enumerate().skip(from) {
                if let Some(found) = self.visit(walk, slot, now_ms, keys) {
                    walk.cursor = Cursor::Window(index + 1);
                    return found;
                }
            }
            walk.cursor = Cursor::Fresh(self.next_fresh());
        }
        let Cursor::Fresh(mut fresh) = walk.cursor else {
            unreachable!("the slots are walked")
        };
        let window_end = self
            .position
            .saturating_add(u64::from(self.config.max_in_flight));
        let keyed_end = self.position.saturating_add(self.keyed_span());
        while fresh < log_end.min(keyed_end) {
            match keys.key_hash(fresh) {
                Some(key) if walk.busy.contains(&key) => fresh += 1,
                // Past `position + W` only keyed messages go (see "The window" in `keys.rs`).
                None if fresh >= window_end => break,
                key => {
                    // Once delivered, its key is in flight: busy for everything above.
                    walk.busy.extend(key);
                    walk.cursor = Cursor::Fresh(fresh + 1);
                    return Ok(fresh);
                }
            }
        }
        walk.cursor = Cursor::Fresh(fresh);
        Err(walk
            .wait
            .map_or(PollStep::Idle, |until_ms| PollStep::Wait { until_ms }))
    }

    /// Visits one slot of the walk: `Some` ends the walk with a delivery or an answer.
    #[inline(always)]
    fn visit(
        &self,
        walk: &mut Walk,
        slot: &Slot,
        now_ms: u64,
        keys: &mut dyn KeyLookup,
    ) -> Option<Result<u64, PollStep>> {
        let SlotPhase::Ready { not_before_ms } = slot.phase else {
            return None;
        };
        let earliest = walk.wait.map_or(not_before_ms, |w| w.min(not_before_ms));
        match self.key_of(slot.offset, keys) {
            None if not_before_ms <= now_ms => Some(Ok(slot.offset)),
            None => Some(Err(PollStep::Wait { until_ms: earliest })),
            // Its key is in flight, or a lower message of it is unfinished: this one
            // waits its turn.
            Some(key) if !walk.busy.insert(key) => None,
            Some(_) if not_before_ms <= now_ms => Some(Ok(slot.offset)),
            Some(_) => {
                walk.wait = Some(earliest);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::group::{
        DeliveryId, GroupConfig, GroupState, NackKind, NackOptions, PollStep, SlotPhase, WindowScan,
    };

    /// One call in a random history of a keyed log; time moves only by `Advance`.
    #[derive(Debug, Clone)]
    enum Op {
        Publish { key: Option<u8> },
        Batch { max: usize },
        Ack { pick: usize },
        Nack { pick: usize, delay_ms: Option<u64> },
        Redrive,
        Advance { ms: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => proptest::option::of(0..6u8).prop_map(|key| Op::Publish { key }),
            3 => (1..12usize).prop_map(|max| Op::Batch { max }),
            3 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
            2 => (any::<usize>(), proptest::option::of(0..40u64))
                .prop_map(|(pick, delay_ms)| Op::Nack { pick, delay_ms }),
            1 => Just(Op::Redrive),
            2 => (0..30u64).prop_map(|ms| Op::Advance { ms }),
        ]
    }

    fn in_flight(group: &GroupState, pick: usize) -> Option<DeliveryId> {
        let ids: Vec<DeliveryId> = group
            .slots()
            .filter(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
            .map(|slot| DeliveryId {
                offset: slot.offset,
                attempt: slot.attempt,
            })
            .collect();
        (!ids.is_empty()).then(|| ids[pick % ids.len()])
    }

    /// Plans a batch of up to `max` on `group`, one step at a time, with `scan` kept
    /// across the steps (`Some`) or every step planned from scratch (`None`).
    fn batch(
        group: &mut GroupState,
        log: &[Option<u64>],
        now_ms: u64,
        max: usize,
        mut scan: Option<WindowScan>,
    ) -> Vec<PollStep> {
        let mut lookup = |offset: u64| log[offset as usize];
        let log_end = log.len() as u64;
        let mut steps = Vec::new();
        while steps.len() < 4 * max {
            let step = match &mut scan {
                Some(scan) => group.plan_poll_new_scanned(log_end, now_ms, &mut lookup, scan),
                None => group.plan_poll_new_keyed(log_end, now_ms, &mut lookup),
            };
            steps.push(step.clone());
            match step {
                PollStep::Expire(change) => {
                    group.apply_change(&change).unwrap();
                    scan = scan.map(|_| WindowScan::default());
                }
                PollStep::Deliver(new) => group.apply_delivery(new, Some("a")).unwrap(),
                _ => break,
            }
        }
        steps
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// A batch that keeps its walk of the window from one delivery to the next plans
        /// exactly what planning every delivery from scratch plans, step by step.
        #[test]
        fn a_kept_scan_plans_as_a_new_one(
            w in 1..6u32,
            lease in proptest::option::of(1..40u64),
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let config = GroupConfig::new(3).with_max_in_flight(w);
            let config = match lease {
                Some(lease_ms) => config.with_lease_ms(lease_ms),
                None => config,
            };
            let mut group = GroupState::with_config(config, 0).unwrap();
            let mut log: Vec<Option<u64>> = Vec::new();
            let mut now = 0;
            for op in &ops {
                match *op {
                    Op::Publish { key } => log.push(key.map(u64::from)),
                    Op::Advance { ms } => now += ms,
                    Op::Batch { max } => {
                        let mut scratch = group.clone();
                        let kept = batch(&mut group, &log, now, max, Some(WindowScan::default()));
                        let planned = batch(&mut scratch, &log, now, max, None);
                        prop_assert_eq!(kept, planned);
                        prop_assert_eq!(&group, &scratch);
                    }
                    Op::Ack { pick } => {
                        if let Some(Ok(change)) = in_flight(&group, pick).map(|id| group.plan_ack(id, now)) {
                            group.apply_change(&change).unwrap();
                        }
                    }
                    Op::Nack { pick, delay_ms } => {
                        let options = NackOptions { kind: NackKind::Nack, delay_ms, reason: None };
                        let planned = in_flight(&group, pick).map(|id| group.plan_nack(id, &options, now));
                        if let Some(Ok(change)) = planned {
                            group.apply_change(&change).unwrap();
                        }
                    }
                    Op::Redrive => {
                        if let Some(change) = group.plan_redrive(0..u64::MAX) {
                            group.apply_change(&change).unwrap();
                        }
                    }
                }
            }
        }
    }
}
