//! The checker's model of one message in one group with leases, delays and dead-letter
//! handling: what a confirmed, timed history allows the store to hold at the kill (the
//! rules are in the parent file's module docs). Written from the documented rules of
//! `mailroom::group`, not from its code.

use mailroom::group::Backoff;
use mailroom_testkit::model::backoff_ms as reference_backoff_ms;

/// How a dead letter died.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// A nack used up the failures ("failed").
    Nack,
    /// A reject ("rejected").
    Reject,
    /// A lease ran out on the last failure allowed ("lease expired").
    Expired,
}

/// Where one message stands in one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Never delivered.
    Fresh,
    /// Delivered; `time_ms` is its lease's deadline.
    InFlight,
    /// Waiting for its next delivery, not before `time_ms`.
    Ready,
    /// Acked or purged.
    Finished,
    /// A dead letter, made at `time_ms`.
    Dead(Why),
}

/// One message's state in one group: `attempt` is its latest delivery (0: none; 0 once
/// finished); `failures` counts nacks and expiries since its first delivery or last
/// redrive (0 unless in flight or ready).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub phase: Phase,
    pub attempt: u32,
    pub failures: u32,
    pub time_ms: u64,
}

/// A message never delivered.
pub const FRESH: Slot = slot(Phase::Fresh, 0, 0, 0);
/// A message acked or purged.
pub const FINISHED: Slot = slot(Phase::Finished, 0, 0, 0);

/// A state, briefly.
pub const fn slot(phase: Phase, attempt: u32, failures: u32, time_ms: u64) -> Slot {
    Slot {
        phase,
        attempt,
        failures,
        time_ms,
    }
}

/// A group's rules, as the child creates it.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub max_attempts: u32,
    pub lease_ms: u64,
    pub backoff: Backoff,
}

impl Rules {
    /// The group's delay after the `failures`-th failure (the first is 1).
    fn backoff_ms(&self, failures: u32) -> u64 {
        reference_backoff_ms(Some(self.backoff), failures)
    }
}

/// The delays a child's nack may carry (`None`: the group's backoff).
pub const NACK_DELAYS_MS: [Option<u64>; 3] = [None, Some(0), Some(30)];
/// The delays a child's release may carry (`None`: at once).
pub const RELEASE_DELAYS_MS: [Option<u64>; 2] = [None, Some(30)];

/// What a confirmed line says was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A poll handed out this attempt (again, if its consumer owned it).
    Deliver,
    Touch,
    Ack,
    /// A nack with this delay; `true` if it dead-lettered.
    Nack(Option<u64>, bool),
    /// A release with this delay.
    Release(Option<u64>),
    Reject,
    /// An ack, nack, release, reject or touch of this attempt was refused: not owned.
    Refused,
    Redrive,
    Purge,
}

/// One confirmed operation on one message of one group, at a known time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fact {
    pub attempt: u32,
    pub at_ms: u64,
    pub act: Act,
}

impl Fact {
    /// Replay order: by attempt; the owner's lines of an attempt (in printed order) before
    /// the redriver's redrive or purge of it.
    fn order(&self) -> (u32, u8) {
        let redriver = matches!(self.act, Act::Redrive | Act::Purge);
        (self.attempt, u8::from(redriver))
    }
}

/// `from` at `now_ms`: an in-flight delivery whose deadline has come has expired (a
/// failure dated at the deadline). The store does this before any other operation on
/// the group, so it is not anyone's choice.
pub fn expire(rules: &Rules, from: Slot, now_ms: u64) -> Slot {
    if from.phase != Phase::InFlight || from.time_ms > now_ms {
        return from;
    }
    let (deadline, failures) = (from.time_ms, from.failures + 1);
    if failures >= rules.max_attempts {
        return slot(Phase::Dead(Why::Expired), from.attempt, 0, deadline);
    }
    let retry_ms = deadline + rules.backoff_ms(failures);
    slot(Phase::Ready, from.attempt, failures, retry_ms)
}

/// `fact` applied to `from`, if it follows from it.
pub fn apply(rules: &Rules, from: Slot, fact: Fact) -> Option<Slot> {
    let now = fact.at_ms;
    let s = expire(rules, from, now);
    let a = fact.attempt;
    let owned = s.phase == Phase::InFlight && s.attempt == a;
    let failed = s.failures + 1;
    let last = failed >= rules.max_attempts;
    match fact.act {
        Act::Deliver if owned => Some(s),
        Act::Deliver => (matches!(s.phase, Phase::Fresh | Phase::Ready)
            && s.time_ms <= now
            && a == s.attempt + 1)
            .then_some(slot(Phase::InFlight, a, s.failures, now + rules.lease_ms)),
        Act::Touch => owned.then_some(slot(Phase::InFlight, a, s.failures, now + rules.lease_ms)),
        Act::Ack => owned.then_some(FINISHED),
        Act::Nack(delay, dead) => (owned && dead == last).then(|| match delay {
            _ if dead => slot(Phase::Dead(Why::Nack), a, 0, now),
            Some(delay) => slot(Phase::Ready, a, failed, now + delay),
            None => slot(Phase::Ready, a, failed, now + rules.backoff_ms(failed)),
        }),
        Act::Release(delay) => {
            owned.then_some(slot(Phase::Ready, a, s.failures, now + delay.unwrap_or(0)))
        }
        Act::Reject => owned.then_some(slot(Phase::Dead(Why::Reject), a, 0, now)),
        // Only its owner settles an attempt, and the owner is the one refused: so it was
        // its lease that ran out.
        Act::Refused => (s.attempt == a
            && matches!(s.phase, Phase::Ready | Phase::Dead(Why::Expired)))
        .then_some(s),
        Act::Redrive => (matches!(s.phase, Phase::Dead(_)) && s.attempt == a).then_some(slot(
            Phase::Ready,
            a,
            0,
            0,
        )),
        Act::Purge => (matches!(s.phase, Phase::Dead(_)) && s.attempt == a).then_some(FINISHED),
    }
}

/// What other threads' unconfirmed calls may have done to `from` (already expired) before
/// a confirmed fact that needs it: the owner's retry, release or dead letter, then the
/// redriver's redrive. Their times are unknown, so a ready state is due at once and a
/// dead one has no time: only a delivery, redrive or purge may follow them.
fn gaps(rules: &Rules, from: Slot) -> Vec<Slot> {
    let mut out = vec![from];
    if from.phase == Phase::InFlight {
        let a = from.attempt;
        out.push(slot(Phase::Ready, a, from.failures, 0));
        if from.failures + 1 < rules.max_attempts {
            out.push(slot(Phase::Ready, a, from.failures + 1, 0));
        }
        out.push(slot(Phase::Dead(Why::Reject), a, 0, 0));
    }
    for state in out.clone() {
        if matches!(state.phase, Phase::Dead(_)) {
            out.push(slot(Phase::Ready, state.attempt, 0, 0));
        }
    }
    out
}

/// The states the calls cut short by the kill at `kill_ms` may have left `from` in:
/// its owner's one settle or touch, then a redrive or purge, then one more delivery.
fn unconfirmed(rules: &Rules, from: Slot, kill_ms: u64) -> Vec<Slot> {
    let from = expire(rules, from, kill_ms);
    let at = |act| Fact {
        attempt: from.attempt,
        at_ms: kill_ms,
        act,
    };
    let mut acts = vec![Act::Touch, Act::Ack, Act::Reject];
    for delay in NACK_DELAYS_MS {
        acts.extend([Act::Nack(delay, false), Act::Nack(delay, true)]);
    }
    acts.extend(RELEASE_DELAYS_MS.map(Act::Release));
    let mut out = vec![from];
    out.extend(
        acts.into_iter()
            .filter_map(|act| apply(rules, from, at(act))),
    );
    for state in out.clone() {
        let fact = |act| Fact {
            attempt: state.attempt,
            at_ms: kill_ms,
            act,
        };
        out.extend(
            [Act::Redrive, Act::Purge]
                .into_iter()
                .filter_map(|act| apply(rules, state, fact(act))),
        );
    }
    for state in out.clone() {
        let deliver = Fact {
            attempt: state.attempt + 1,
            at_ms: kill_ms,
            act: Act::Deliver,
        };
        // A delivery refuses an in-flight state (the attempt would not follow).
        out.extend(apply(rules, state, deliver).filter(|_| state.phase != Phase::InFlight));
    }
    out
}

/// Every state the message may be in at `kill_ms`, from any of `bases` after `facts`
/// (confirmed, in printed order) and the unconfirmed calls.
pub fn allowed(
    rules: &Rules,
    bases: &[Slot],
    facts: &[Fact],
    kill_ms: u64,
) -> Result<Vec<Slot>, String> {
    let mut facts = facts.to_vec();
    facts.sort_by_key(Fact::order);
    let mut states = bases.to_vec();
    for &fact in &facts {
        let mut next = Vec::new();
        for &state in &states {
            match apply(rules, state, fact) {
                Some(after) => next.push(after),
                None if matches!(fact.act, Act::Deliver | Act::Redrive | Act::Purge) => {
                    let expired = expire(rules, state, fact.at_ms);
                    let gaps = gaps(rules, expired).into_iter().skip(1);
                    next.extend(gaps.filter_map(|gap| apply(rules, gap, fact)));
                }
                None => {}
            }
        }
        next.sort();
        next.dedup();
        if next.is_empty() {
            return Err(format!(
                "confirmed {fact:?} does not follow from {states:?} (facts {facts:?})"
            ));
        }
        states = next;
    }
    let mut after: Vec<Slot> = states
        .iter()
        .flat_map(|&s| unconfirmed(rules, s, kill_ms))
        .collect();
    after.sort();
    after.dedup();
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: Rules = Rules {
        max_attempts: 2,
        lease_ms: 60,
        backoff: Backoff::Exponential {
            base_ms: 10,
            cap_ms: 40,
        },
    };

    fn fact(attempt: u32, at_ms: u64, act: Act) -> Fact {
        Fact {
            attempt,
            at_ms,
            act,
        }
    }

    // Proves the checker expires a lease at its deadline (a failure dated there, with
    // the backoff after it), fences the late owner out, and dead-letters the last one.
    #[test]
    fn checker_expires_leases_at_their_deadline() {
        let polled = [fact(1, 100, Act::Deliver)];
        let live = allowed(&RULES, &[FRESH], &polled, 159).unwrap();
        assert!(live.contains(&slot(Phase::InFlight, 1, 0, 160)));
        assert!(!live
            .iter()
            .any(|s| s.phase == Phase::Ready && s.failures == 1 && s.time_ms == 170));
        let late = [fact(1, 100, Act::Deliver), fact(1, 165, Act::Refused)];
        let expired = allowed(&RULES, &[FRESH], &late, 165).unwrap();
        assert!(expired.contains(&slot(Phase::Ready, 1, 1, 170)));
        assert!(!expired
            .iter()
            .any(|s| s.phase == Phase::InFlight && s.attempt == 1));
        // A refusal before the deadline, or an ack after it, does not follow.
        assert!(allowed(
            &RULES,
            &[FRESH],
            &[polled[0], fact(1, 150, Act::Refused)],
            150
        )
        .is_err());
        assert!(allowed(&RULES, &[FRESH], &[polled[0], fact(1, 160, Act::Ack)], 160).is_err());
        let twice = [
            polled[0],
            fact(1, 165, Act::Refused),
            fact(2, 170, Act::Deliver),
        ];
        let dead = allowed(&RULES, &[FRESH], &twice, 230).unwrap();
        assert!(dead.contains(&slot(Phase::Dead(Why::Expired), 2, 0, 230)));
    }

    // Proves the checker holds delays: no delivery before a nack's or release's time,
    // touch moves the deadline, and a redrive needs a dead letter of that attempt.
    #[test]
    fn checker_keeps_delays_touches_and_redrives() {
        let nacked = [
            fact(1, 100, Act::Deliver),
            fact(1, 110, Act::Nack(Some(30), false)),
        ];
        assert!(allowed(
            &RULES,
            &[FRESH],
            &[nacked[0], nacked[1], fact(2, 130, Act::Deliver)],
            130
        )
        .is_err());
        assert!(allowed(
            &RULES,
            &[FRESH],
            &[nacked[0], nacked[1], fact(2, 140, Act::Deliver)],
            140
        )
        .is_ok());
        let touched = [
            fact(1, 100, Act::Deliver),
            fact(1, 150, Act::Touch),
            fact(1, 200, Act::Ack),
        ];
        assert_eq!(
            allowed(&RULES, &[FRESH], &touched, 200).unwrap(),
            [FINISHED]
        );
        let rejected = [
            fact(1, 100, Act::Deliver),
            fact(1, 100, Act::Reject),
            fact(1, 120, Act::Redrive),
        ];
        let redriven = allowed(&RULES, &[FRESH], &rejected, 120).unwrap();
        assert!(redriven.contains(&slot(Phase::Ready, 1, 0, 0)));
        assert!(allowed(&RULES, &[FRESH], &[fact(1, 100, Act::Redrive)], 100).is_err());
    }
}
