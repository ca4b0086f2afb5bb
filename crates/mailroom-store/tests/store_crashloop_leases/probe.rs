//! Reading one group's state at the kill out of a copy of the killed store: dead letters
//! and deliveries in flight as they are, lease deadlines by moving the clock a tick at a
//! time, and every other unfinished message by draining it (see the parent file's docs).

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use mailroom::group::{GroupCounters, NackKind, NackOptions, DELAY_MS_MAX};
use mailroom_store::clock::ManualClock;
use mailroom_store::{DurableTopic, StoreError};

use super::model::{slot, Phase, Slot, Why, FINISHED};
use super::{GroupSpec, STEP_MS};

/// Who owns deliveries in flight: (offset, attempt) → consumer.
pub type Owners = BTreeMap<(u64, u32), String>;

/// How far past the kill the drain looks: longer than any lease, plus any delay or
/// backoff after it.
const DRAIN_MS: u64 = 200;

/// One message as the probe found it. `first_ms` is when the drain first got it, for a
/// message that was ready or never delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen {
    pub state: Slot,
    pub first_ms: Option<u64>,
}

/// One group at the kill.
pub struct Observed {
    pub seen: BTreeMap<u64, Seen>,
    pub counters: GroupCounters,
    /// When the drain could deliver something it could not deliver a tick before, for a
    /// reason other than the message's own delay: another message's lease ran out or it
    /// was first delivered (and finished at once) then.
    releases_ms: BTreeMap<u64, usize>,
}

impl Observed {
    /// Whether something other than `seen` itself released the drain at `at_ms`.
    pub fn released_by_another(&self, at_ms: u64, own_first_ms: bool) -> bool {
        let count = self.releases_ms.get(&at_ms).copied().unwrap_or(0);
        count > usize::from(own_first_ms)
    }
}

fn why(reason: Option<&str>) -> Result<Why, String> {
    match reason {
        // The probe's own nacks (only in its copy, after the kill) say "probe".
        Some("failed" | "probe") => Ok(Why::Nack),
        Some("rejected") => Ok(Why::Reject),
        Some("lease expired") => Ok(Why::Expired),
        other => Err(format!("dead letter with reason {other:?}")),
    }
}

/// The dead letters of `group` now, by offset (the read first applies the expiries due
/// now, which may add dead letters).
fn dead_letters(
    topic: &DurableTopic,
    group: &str,
    messages: &[Bytes],
) -> Result<BTreeMap<u64, Slot>, String> {
    let err = |e: StoreError| format!("probe of {group}: {e}");
    let mut dead = BTreeMap::new();
    for letter in topic.dead_letter_info(group).map_err(err)? {
        if messages.get(letter.offset as usize) != Some(&letter.message) {
            return Err(format!(
                "{group}: dead letter {} has the wrong payload",
                letter.offset
            ));
        }
        let state = slot(
            Phase::Dead(why(letter.reason.as_deref())?),
            letter.attempts,
            0,
            letter.at_ms,
        );
        if dead.insert(letter.offset, state).is_some() {
            return Err(format!(
                "{group}: offset {} dead-lettered twice",
                letter.offset
            ));
        }
    }
    Ok(dead)
}

/// What the drain met: per offset, when and with which attempt it first delivered it,
/// and how many probe nacks it took to dead-letter it.
#[derive(Default)]
struct Drain {
    first: BTreeMap<u64, (u64, u32)>,
    nacks: BTreeMap<u64, u32>,
    deadlines: BTreeMap<u64, u64>,
}

/// Reads `spec`'s group in the copy at `kill_ms` (the copy's clock is `clock`).
pub fn observe(
    topic: &DurableTopic,
    clock: &ManualClock,
    spec: &GroupSpec,
    kill_ms: u64,
    messages: &[Bytes],
) -> Result<Observed, String> {
    let group = spec.name;
    let err = |e: StoreError| format!("probe of {group}: {e}");
    clock.set_ms(kill_ms);
    let dead = dead_letters(topic, group, messages)?;
    let counters = topic.group_counters(group).map_err(err)?;
    let in_flight: BTreeMap<u64, u32> = topic
        .in_flight(group)
        .map_err(err)?
        .into_iter()
        .map(|id| (id.offset, id.attempt))
        .collect();
    if in_flight.len() > spec.max_in_flight {
        return Err(format!("{group}: {} in flight", in_flight.len()));
    }
    let drain = drain(topic, clock, spec, kill_ms, &in_flight)?;
    let dead_after = dead_letters(topic, group, messages)?;
    let len = topic.len();
    if topic.position(group).map_err(err)? != len {
        return Err(format!("{group}: the drain did not finish"));
    }
    let mut seen = BTreeMap::new();
    for offset in 0..len {
        let found = seen_at(offset, spec, &dead, &in_flight, &drain, &dead_after)
            .map_err(|e| format!("{group} {offset}: {e}"))?;
        seen.insert(offset, found);
    }
    let mut releases_ms = BTreeMap::new();
    for &at in drain
        .deadlines
        .values()
        .chain(drain.first.values().map(|(at, _)| at))
    {
        *releases_ms.entry(at).or_insert(0) += 1;
    }
    Ok(Observed {
        seen,
        counters,
        releases_ms,
    })
}

/// Moves the clock a tick at a time from the kill: notes when each delivery in flight
/// runs out, and delivers (and nacks until dead) whatever becomes deliverable.
fn drain(
    topic: &DurableTopic,
    clock: &ManualClock,
    spec: &GroupSpec,
    kill_ms: u64,
    in_flight: &BTreeMap<u64, u32>,
) -> Result<Drain, String> {
    let group = spec.name;
    let err = |e: StoreError| format!("probe of {group}: {e}");
    let mut drain = Drain::default();
    let nack = NackOptions::new(NackKind::Nack)
        .with_delay_ms(0)
        .with_reason("probe");
    let mut now = kill_ms;
    while now <= kill_ms + DRAIN_MS {
        clock.set_ms(now);
        let live: BTreeSet<u64> = topic
            .in_flight(group)
            .map_err(err)?
            .iter()
            .map(|id| id.offset)
            .collect();
        for &offset in in_flight.keys() {
            if !live.contains(&offset) && !drain.deadlines.contains_key(&offset) {
                drain.deadlines.insert(offset, now);
            }
        }
        loop {
            let batch = topic.poll_batch(group, Some("probe"), 64).map_err(err)?;
            if batch.is_empty() {
                break;
            }
            for delivery in batch {
                drain
                    .first
                    .entry(delivery.offset)
                    .or_insert((now, delivery.attempt));
                topic
                    .nack_with(group, delivery.id(), nack.clone())
                    .map_err(err)?;
                *drain.nacks.entry(delivery.offset).or_insert(0) += 1;
            }
        }
        now += STEP_MS;
    }
    // Everything waited less than the drain looked ahead: nothing is left for later.
    clock.set_ms(kill_ms + DELAY_MS_MAX);
    let left = topic.poll_batch(group, Some("probe"), 64).map_err(err)?;
    if let Some(delivery) = left.first() {
        return Err(format!(
            "{group}: {} deliverable only after the drain",
            delivery.id()
        ));
    }
    Ok(drain)
}

/// What `offset` was at the kill, from what the drain met.
fn seen_at(
    offset: u64,
    spec: &GroupSpec,
    dead: &BTreeMap<u64, Slot>,
    in_flight: &BTreeMap<u64, u32>,
    drain: &Drain,
    dead_after: &BTreeMap<u64, Slot>,
) -> Result<Seen, String> {
    let max = spec.rules.max_attempts;
    let nacks = drain.nacks.get(&offset).copied().unwrap_or(0);
    let first = drain.first.get(&offset).copied();
    let failures = |spent: u32| max.checked_sub(spent).ok_or(format!("{nacks} probe nacks"));
    if let Some(&state) = dead.get(&offset) {
        if first.is_some() {
            return Err("a dead letter was delivered".into());
        }
        return Ok(Seen {
            state,
            first_ms: None,
        });
    }
    if let Some(&attempt) = in_flight.get(&offset) {
        let deadline = *drain
            .deadlines
            .get(&offset)
            .ok_or("its lease never ran out")?;
        let failures = match first {
            Some((_, next)) if next == attempt + 1 => failures(nacks + 1)?,
            Some(other) => {
                return Err(format!(
                    "in flight as {attempt}, then delivered as {other:?}"
                ))
            }
            // Its expiry was its last failure.
            None => match dead_after.get(&offset) {
                Some(d) if d.phase == Phase::Dead(Why::Expired) && d.attempt == attempt => max - 1,
                other => return Err(format!("expired in the drain, then {other:?}")),
            },
        };
        let state = slot(Phase::InFlight, attempt, failures, deadline);
        return Ok(Seen {
            state,
            first_ms: None,
        });
    }
    Ok(match first {
        Some((at, 1)) if nacks == max => Seen {
            state: slot(Phase::Fresh, 0, 0, 0),
            first_ms: Some(at),
        },
        Some((at, next)) => Seen {
            state: slot(Phase::Ready, next - 1, failures(nacks)?, 0),
            first_ms: Some(at),
        },
        None => Seen {
            state: FINISHED,
            first_ms: None,
        },
    })
}

/// Who owns each delivery of `spec`'s group in flight at the kill: (offset, attempt) →
/// consumer. A batch poll as a consumer hands out its own deliveries first, then new
/// ones; so this runs on a copy of its own, where the new ones it makes do not matter.
pub fn owners(topic: &DurableTopic, spec: &GroupSpec) -> Result<Owners, String> {
    let group = spec.name;
    let err = |e: StoreError| format!("owners in {group}: {e}");
    let in_flight: BTreeSet<(u64, u32)> = topic
        .in_flight(group)
        .map_err(err)?
        .iter()
        .map(|id| (id.offset, id.attempt))
        .collect();
    let mut owners = Owners::new();
    for &name in spec.consumers {
        let batch = topic
            .poll_batch(group, Some(name), spec.max_in_flight)
            .map_err(err)?;
        for key in batch
            .iter()
            .map(|delivery| (delivery.offset, delivery.attempt))
        {
            let known = in_flight
                .contains(&key)
                .then(|| owners.insert(key, name.to_owned()));
            if known.flatten().is_some() {
                return Err(format!("{group}: {key:?} owned by two consumers"));
            }
        }
    }
    match in_flight.iter().find(|key| !owners.contains_key(key)) {
        Some(lost) => Err(format!(
            "{group}: {lost:?} in flight, owned by none of {:?}",
            spec.consumers
        )),
        None => Ok(owners),
    }
}
