//! The checker's model of one message in one group: what a confirmed history allows the
//! store to hold after a kill -9 (the rules are in the parent file's module docs).

/// Where one message stands in one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Never delivered.
    Fresh,
    /// Delivered, owned by a consumer.
    InFlight,
    /// Nacked or released, waiting for its next delivery.
    Ready,
    /// Finished by an ack.
    Acked,
    /// Finished as a dead letter.
    Dead,
}

/// One message's state in one group: `attempt` is its latest delivery (0 if none, and 0
/// once acked: an ack leaves no trace of it); `failures` counts nacks (not releases)
/// towards `max_attempts` while unfinished (0 once finished).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Slot {
    pub phase: Phase,
    pub attempt: u32,
    pub failures: u32,
}

/// A message never delivered.
pub const FRESH: Slot = Slot {
    phase: Phase::Fresh,
    attempt: 0,
    failures: 0,
};
/// A message acked.
pub const ACKED: Slot = Slot {
    phase: Phase::Acked,
    attempt: 0,
    failures: 0,
};

/// A state, briefly.
pub fn slot(phase: Phase, attempt: u32, failures: u32) -> Slot {
    Slot {
        phase,
        attempt,
        failures,
    }
}

/// What a nack line says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A nack with failures left: ready again.
    Retry,
    /// A release: ready again, no failure counted.
    Released,
    /// A nack of the last failure allowed: dead-lettered.
    Dead,
}

/// One confirmed operation on one message of one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// A poll handed out this attempt (again, if the consumer already owned it).
    Deliver(u32),
    /// This attempt was acked.
    Ack(u32),
    /// This attempt was nacked or released, with this outcome.
    Nack(u32, Outcome),
}

impl Fact {
    /// Replay order: by attempt, a delivery before its settlement.
    pub fn order(&self) -> (u32, u8) {
        match *self {
            Fact::Deliver(attempt) => (attempt, 0),
            Fact::Ack(attempt) | Fact::Nack(attempt, _) => (attempt, 1),
        }
    }
}

/// `fact` applied to `from`, if it follows from it.
pub fn apply(from: Slot, fact: Fact, max_attempts: u32) -> Option<Slot> {
    let owned = |attempt| from.phase == Phase::InFlight && from.attempt == attempt;
    match fact {
        Fact::Deliver(a) if owned(a) => Some(from),
        Fact::Deliver(a) => (matches!(from.phase, Phase::Fresh | Phase::Ready)
            && a == from.attempt + 1)
            .then_some(slot(Phase::InFlight, a, from.failures)),
        Fact::Ack(a) => owned(a).then_some(ACKED),
        Fact::Nack(a, outcome) if owned(a) => {
            let last = from.failures + 1 >= max_attempts;
            match outcome {
                Outcome::Released => Some(slot(Phase::Ready, a, from.failures)),
                Outcome::Retry => (!last).then_some(slot(Phase::Ready, a, from.failures + 1)),
                Outcome::Dead => last.then_some(slot(Phase::Dead, a, 0)),
            }
        }
        Fact::Nack(..) => None,
    }
}

/// What the owner's one unconfirmed settlement of `from` (in flight) may have left.
pub fn settlements(from: Slot, max_attempts: u32) -> Vec<Slot> {
    let a = from.attempt;
    [
        Fact::Ack(a),
        Fact::Nack(a, Outcome::Released),
        Fact::Nack(a, Outcome::Retry),
        Fact::Nack(a, Outcome::Dead),
    ]
    .into_iter()
    .filter_map(|fact| apply(from, fact, max_attempts))
    .collect()
}

/// Every state the message may be in after `facts` (confirmed, any order) from `base`.
pub fn allowed(base: Slot, facts: &[Fact], max_attempts: u32) -> Result<Vec<Slot>, String> {
    let mut facts = facts.to_vec();
    facts.sort_by_key(Fact::order);
    let mut states = vec![base];
    for &fact in &facts {
        let mut next = Vec::new();
        for &state in &states {
            if let Some(after) = apply(state, fact, max_attempts) {
                next.push(after);
            } else if let (Fact::Deliver(a), Phase::InFlight) = (fact, state.phase) {
                // A redelivery whose previous attempt's retry or release was not confirmed.
                let gaps = settlements(state, max_attempts);
                next.extend(
                    gaps.into_iter()
                        .filter_map(|s| apply(s, Fact::Deliver(a), max_attempts)),
                );
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
    let mut after = states.clone();
    for &state in &states {
        if state.phase == Phase::InFlight {
            after.extend(settlements(state, max_attempts));
        }
    }
    for state in after.clone() {
        // Ready or never delivered (an in-flight one refuses this): another thread's
        // unconfirmed poll.
        after.extend(apply(state, Fact::Deliver(state.attempt + 1), max_attempts));
    }
    after.sort();
    after.dedup();
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the checker's rule for one confirmed delivery: still in flight, or settled by its
    // owner's one unconfirmed call (ack, retry, release), then at most one redelivery.
    #[test]
    fn checker_allows_only_one_unconfirmed_settle_and_redelivery() {
        let found = allowed(FRESH, &[Fact::Deliver(1)], 3).unwrap();
        let expected = [
            slot(Phase::InFlight, 1, 0),
            slot(Phase::InFlight, 2, 0),
            slot(Phase::InFlight, 2, 1),
            slot(Phase::Ready, 1, 0),
            slot(Phase::Ready, 1, 1),
            ACKED,
        ];
        assert_eq!(found, expected);
        // With the last failure used up, the unconfirmed nack dead-letters instead.
        let last = allowed(slot(Phase::InFlight, 3, 2), &[], 3).unwrap();
        assert!(last.contains(&slot(Phase::Dead, 3, 0)));
        assert!(!last.contains(&slot(Phase::Ready, 3, 3)));
        assert!(!allowed(FRESH, &[Fact::Deliver(1)], 3)
            .unwrap()
            .contains(&slot(Phase::Dead, 1, 0)));
    }

    // Proves the checker treats confirmed acks and dead letters as final and refuses a
    // confirmed outcome the failures so far rule out, whatever order the lines came in.
    #[test]
    fn checker_keeps_confirmed_settlements_final() {
        let acked = [Fact::Ack(2), Fact::Deliver(2), Fact::Deliver(1)];
        assert_eq!(allowed(FRESH, &acked, 3).unwrap(), [ACKED]);
        let dead = [
            Fact::Deliver(1),
            Fact::Nack(1, Outcome::Retry),
            Fact::Deliver(2),
        ];
        let dead = [&dead[..], &[Fact::Nack(2, Outcome::Dead)]].concat();
        assert_eq!(allowed(FRESH, &dead, 2).unwrap(), [slot(Phase::Dead, 2, 0)]);
        assert!(
            allowed(FRESH, &dead, 3).is_err(),
            "a dead letter with failures left"
        );
        assert!(
            allowed(FRESH, &[Fact::Ack(1)], 3).is_err(),
            "an ack of nothing delivered"
        );
        assert!(
            allowed(ACKED, &[Fact::Deliver(1)], 3).is_err(),
            "a delivery after the ack"
        );
        // Two redeliveries in a row would need an unconfirmed delivery to be settled.
        assert!(allowed(FRESH, &[Fact::Deliver(1), Fact::Deliver(3)], 3).is_err());
    }
}
