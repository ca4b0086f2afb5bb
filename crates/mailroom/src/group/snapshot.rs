//! [`GroupSnapshot`]: the plain-data form of a group, for checkpoints, and its checks.

use std::collections::{BTreeMap, VecDeque};

use super::config::GroupConfig;
use super::keys::KEYED_WINDOW_SPAN;
use super::pause::Pause;
use super::state::{DeadLetterNote, GroupCounters, GroupState, Slot, SlotPhase};
use super::{DeadLetterEntry, GroupError};

/// The plain-data form of a group, for checkpoints. Restore it with
/// [`GroupState::from_snapshot`], which checks it.
///
/// The first five fields are the basic view (every setting unset): `attempt` and `in_flight` describe the
/// message at `position` and must agree with `window`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The offset of the lowest message not finished.
    pub position: u64,
    /// Deliveries made so far of the message at `position` (0 if none).
    pub attempt: u32,
    /// Whether that message's latest delivery is in flight.
    pub in_flight: bool,
    /// The number of failures allowed for one message.
    pub max_attempts: u32,
    /// The dead-letter queue, oldest first.
    pub dead_letters: Vec<DeadLetterEntry>,
    /// The group's settings (its `max_attempts` equals the field above).
    pub config: GroupConfig,
    /// The delivered, unfinished messages from `position` on, one per offset.
    pub window: Vec<Slot>,
    /// Redriven dead letters below `position`, by offset.
    pub redriven: Vec<Slot>,
    /// One note per dead letter.
    pub dead_letter_notes: Vec<DeadLetterNote>,
    /// The counters.
    pub counters: GroupCounters,
    /// Every offset the group has delivered lies below this (restoring raises it past
    /// every slot).
    pub frontier: u64,
    /// Offsets below this may have been delivered before a seek back (0: none).
    pub rewound_below: u64,
    /// The first delivery of an offset below `rewound_below` is attempt
    /// `attempt_floor + 1`.
    pub attempt_floor: u32,
    /// The largest attempt number the group has handed out (restoring raises it to at
    /// least every attempt in the window, the redriven messages and the dead letters).
    pub attempts_high: u32,
    /// The pause recorded, if any.
    pub pause: Option<Pause>,
}

impl GroupSnapshot {
    /// The snapshot of a group with every setting unset and no history, from the five
    /// basic fields, as version 1 checkpoints hold them.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::{GroupSnapshot, GroupState};
    ///
    /// let snapshot = GroupSnapshot::basic(4, 2, true, 3, vec![]);
    /// let group = GroupState::from_snapshot(snapshot).unwrap();
    /// assert_eq!((group.position(), group.attempt()), (4, 2));
    /// ```
    pub fn basic(
        position: u64,
        attempt: u32,
        in_flight: bool,
        max_attempts: u32,
        dead_letters: Vec<DeadLetterEntry>,
    ) -> GroupSnapshot {
        let window = (attempt > 0)
            .then(|| Slot {
                offset: position,
                attempt,
                // Without releases or redrives, every delivery but one in flight failed.
                failures: attempt - u32::from(in_flight),
                phase: if in_flight {
                    SlotPhase::InFlight {
                        consumer: None,
                        lease_until_ms: None,
                    }
                } else {
                    SlotPhase::Ready { not_before_ms: 0 }
                },
            })
            .into_iter()
            .collect();
        let dead_letter_notes = vec![DeadLetterNote::default(); dead_letters.len()];
        GroupSnapshot {
            position,
            attempt,
            in_flight,
            max_attempts,
            dead_letters,
            config: GroupConfig::new(max_attempts),
            window,
            redriven: Vec::new(),
            dead_letter_notes,
            counters: GroupCounters::default(),
            frontier: position + u64::from(attempt > 0),
            rewound_below: 0,
            attempt_floor: 0,
            attempts_high: attempt,
            pause: None,
        }
    }
}

impl GroupState {
    /// The plain-data form of this group, for checkpoints.
    pub fn snapshot(&self) -> GroupSnapshot {
        GroupSnapshot {
            position: self.position,
            attempt: self.attempt(),
            in_flight: self
                .window
                .front()
                .is_some_and(|slot| matches!(slot.phase, SlotPhase::InFlight { .. })),
            max_attempts: self.config.max_attempts,
            dead_letters: self.dead_letters.clone(),
            config: self.config,
            window: self.window.iter().cloned().collect(),
            redriven: self.redriven.values().cloned().collect(),
            dead_letter_notes: self.notes.clone(),
            counters: self.counters,
            frontier: self.frontier,
            rewound_below: self.rewound_below,
            attempt_floor: self.attempt_floor,
            attempts_high: self.attempts_high,
            pause: self.pause,
        }
    }

    /// Restores a group from a checkpoint.
    ///
    /// # Errors
    ///
    /// [`GroupError::ZeroMaxAttempts`] or [`GroupError::InvalidConfig`] for bad settings;
    /// [`GroupError::InvalidSnapshot`] if the fields contradict each other, for example
    /// an attempt that disagrees with the window, a message whose failures already used
    /// up `max_attempts`, or more deliveries in flight than `max_in_flight`.
    ///
    /// # Example
    ///
    /// ```
    /// use mailroom::group::GroupState;
    ///
    /// let group = GroupState::new(3, 7).unwrap();
    /// let restored = GroupState::from_snapshot(group.snapshot()).unwrap();
    /// assert_eq!(restored, group);
    /// ```
    pub fn from_snapshot(snapshot: GroupSnapshot) -> Result<Self, GroupError> {
        if snapshot.max_attempts == 0 {
            return Err(GroupError::ZeroMaxAttempts);
        }
        snapshot.config.check()?;
        let invalid = |why| Err(GroupError::InvalidSnapshot(why));
        if snapshot.config.max_attempts != snapshot.max_attempts {
            return invalid("max_attempts disagrees with the config");
        }
        let head = snapshot.window.first().map_or((0, false), |slot| {
            (
                slot.attempt,
                matches!(slot.phase, SlotPhase::InFlight { .. }),
            )
        });
        if head != (snapshot.attempt, snapshot.in_flight) {
            return invalid("attempt and in_flight disagree with the window");
        }
        if snapshot.dead_letter_notes.len() != snapshot.dead_letters.len() {
            return invalid("one note per dead letter is needed");
        }
        check_slots(&snapshot)?;
        let in_flight = snapshot
            .window
            .iter()
            .chain(&snapshot.redriven)
            .filter(|slot| matches!(slot.phase, SlotPhase::InFlight { .. }))
            .count();
        if snapshot.attempt_floor > snapshot.attempts_high {
            return invalid("the attempt floor lies above the highest attempt");
        }
        let attempts_high = snapshot
            .window
            .iter()
            .chain(&snapshot.redriven)
            .map(|slot| slot.attempt)
            .chain(snapshot.dead_letters.iter().map(|entry| entry.attempts))
            .fold(snapshot.attempts_high, u32::max);
        let frontier = snapshot
            .window
            .iter()
            .chain(&snapshot.redriven)
            .map(|slot| slot.offset.saturating_add(1))
            .fold(snapshot.frontier, u64::max);
        let span = snapshot.config.max_in_flight as usize * KEYED_WINDOW_SPAN as usize;
        if in_flight > snapshot.config.max_in_flight as usize || snapshot.window.len() > span {
            return invalid("more deliveries than max_in_flight");
        }
        Ok(GroupState {
            position: snapshot.position,
            config: snapshot.config,
            window: VecDeque::from(snapshot.window),
            redriven: snapshot
                .redriven
                .into_iter()
                .map(|slot| (slot.offset, slot))
                .collect::<BTreeMap<_, _>>(),
            in_flight: in_flight as u32,
            dead_letters: snapshot.dead_letters,
            notes: snapshot.dead_letter_notes,
            counters: snapshot.counters,
            frontier,
            rewound_below: snapshot.rewound_below,
            attempt_floor: snapshot.attempt_floor,
            attempts_high,
            pause: snapshot.pause,
        })
    }
}

fn check_slots(snapshot: &GroupSnapshot) -> Result<(), GroupError> {
    let invalid = |why| Err(GroupError::InvalidSnapshot(why));
    let config = &snapshot.config;
    for (index, slot) in snapshot.window.iter().enumerate() {
        if Some(slot.offset) != snapshot.position.checked_add(index as u64) {
            return invalid("window offsets are not consecutive from the position");
        }
    }
    if snapshot
        .window
        .first()
        .is_some_and(|slot| slot.phase == SlotPhase::Done)
    {
        return invalid("the window starts with a finished message");
    }
    let mut previous = None;
    for slot in &snapshot.redriven {
        if slot.offset >= snapshot.position || previous.is_some_and(|p| p >= slot.offset) {
            return invalid("redriven offsets must be ascending and below the position");
        }
        if slot.phase == SlotPhase::Done {
            return invalid("a redriven message is finished");
        }
        previous = Some(slot.offset);
    }
    for slot in snapshot.window.iter().chain(&snapshot.redriven) {
        // Attempt 0 is a message held back by its key, never delivered (see `keys.rs`).
        let held = slot.failures == 0 && matches!(slot.phase, SlotPhase::Ready { .. });
        if slot.attempt == 0 && !held {
            return invalid("a delivered message with no attempt");
        }
        if slot.phase != SlotPhase::Done && slot.failures >= config.max_attempts {
            return invalid("attempts exhausted but not dead-lettered");
        }
        if let SlotPhase::InFlight { lease_until_ms, .. } = &slot.phase {
            if lease_until_ms.is_some() != config.lease_ms.is_some() {
                return invalid("a lease that disagrees with the config");
            }
        }
    }
    Ok(())
}
