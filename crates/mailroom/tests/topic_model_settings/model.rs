//! The reference model of a group: its slots, dead letters, counters and pause, written
//! from docs/semantics.md.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Phase {
    Ready(u64),
    Owned(Option<String>, Option<u64>),
    Done,
}

#[derive(Debug, Clone)]
pub(crate) struct MSlot {
    pub(crate) attempt: u32,
    pub(crate) failures: u32,
    pub(crate) phase: Phase,
}

#[derive(Debug, Clone)]
pub(crate) struct MGroup {
    pub(crate) config: GroupConfig,
    pub(crate) position: u64,
    /// Every delivered, unfinished slot: redriven ones below `position`, the window
    /// (with finished ones marked Done) from `position` on.
    pub(crate) slots: BTreeMap<u64, MSlot>,
    pub(crate) dead: Vec<(u64, u32, Option<String>, u64)>,
    pub(crate) counters: GroupCounters,
    /// Every offset below this was delivered (or lay below the start) at some time.
    pub(crate) frontier: u64,
    /// The highest attempt number handed out.
    pub(crate) high: u32,
    /// After a seek back: offsets below `.0` come back after attempt `.1`.
    pub(crate) rewound: (u64, u32),
    pub(crate) pause: Option<Option<u64>>,
    /// Every delivery ever made, which must never repeat.
    pub(crate) handed: BTreeSet<DeliveryId>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    Invalid,
    Unknown,
    Exists,
    NotOwned(DeliveryId, Option<DeliveryId>),
}

pub(crate) fn refused(error: TopicError) -> Refused {
    match error {
        TopicError::InvalidArgument { .. } => Refused::Invalid,
        TopicError::UnknownGroup { .. } => Refused::Unknown,
        TopicError::GroupExists { .. } => Refused::Exists,
        TopicError::NotOwned { source, .. } => Refused::NotOwned(source.requested, source.current),
        other => panic!("unexpected error {other:?}"),
    }
}

impl MGroup {
    pub(crate) fn in_flight(&self) -> Vec<DeliveryId> {
        self.slots
            .iter()
            .filter(|(_, s)| matches!(s.phase, Phase::Owned(..)))
            .map(|(&offset, s)| DeliveryId {
                offset,
                attempt: s.attempt,
            })
            .collect()
    }

    pub(crate) fn finish(&mut self, offset: u64) {
        if offset < self.position {
            self.slots.remove(&offset);
        } else {
            self.slots.get_mut(&offset).unwrap().phase = Phase::Done;
        }
        while self
            .slots
            .get(&self.position)
            .is_some_and(|s| s.phase == Phase::Done)
        {
            self.slots.remove(&self.position);
            self.position += 1;
        }
    }

    pub(crate) fn kill(&mut self, offset: u64, reason: Option<String>, at: u64) {
        let attempt = self.slots[&offset].attempt;
        self.dead.push((offset, attempt, reason, at));
        self.finish(offset);
    }

    /// Expires every lease that ran out by `now`, lowest offset first.
    pub(crate) fn expire(&mut self, now: u64) {
        loop {
            let due = self.slots.iter().find_map(|(&offset, s)| match s.phase {
                Phase::Owned(_, Some(deadline)) if deadline <= now => Some((offset, deadline)),
                _ => None,
            });
            let Some((offset, deadline)) = due else {
                return;
            };
            self.counters.expired_leases += 1;
            let slot = self.slots.get_mut(&offset).unwrap();
            slot.failures += 1;
            if slot.failures >= self.config.max_attempts {
                self.kill(offset, Some("lease expired".into()), deadline);
            } else {
                let failures = slot.failures;
                slot.phase = Phase::Ready(deadline + backoff_ms(self.config.backoff, failures));
            }
        }
    }

    /// The deliveries `consumer` has in flight, by offset.
    pub(crate) fn owned(&self, consumer: Option<&str>) -> Vec<DeliveryId> {
        self.slots
            .iter()
            .filter(
                |(_, s)| matches!(&s.phase, Phase::Owned(owner, _) if owner.as_deref() == consumer),
            )
            .map(|(&offset, s)| DeliveryId {
                offset,
                attempt: s.attempt,
            })
            .collect()
    }

    pub(crate) fn poll(
        &mut self,
        log_len: u64,
        now: u64,
        consumer: Option<&str>,
    ) -> Option<DeliveryId> {
        match self.owned(consumer).first() {
            Some(&own) => Some(own),
            None => self.poll_new(log_len, now, consumer),
        }
    }

    /// The documented batch order: the consumer's own deliveries, then new ones one by
    /// one until `max` or none is left.
    pub(crate) fn poll_batch(
        &mut self,
        log_len: u64,
        now: u64,
        consumer: Option<&str>,
        max: usize,
    ) -> Vec<DeliveryId> {
        let mut batch: Vec<DeliveryId> = self.owned(consumer).into_iter().take(max).collect();
        while batch.len() < max {
            match self.poll_new(log_len, now, consumer) {
                Some(id) => batch.push(id),
                None => break,
            }
        }
        batch
    }

    /// A poll for a new delivery, whatever `consumer` owns already.
    pub(crate) fn poll_new(
        &mut self,
        log_len: u64,
        now: u64,
        consumer: Option<&str>,
    ) -> Option<DeliveryId> {
        if self.pause_at(now).is_some() {
            return None;
        }
        if self.in_flight().len() as u32 >= self.config.max_in_flight {
            return None;
        }
        let mut chosen = None;
        for (&offset, s) in &self.slots {
            match s.phase {
                Phase::Ready(at) if at <= now => {
                    chosen = Some(offset);
                    break;
                }
                Phase::Ready(_) => return None,
                _ => {}
            }
        }
        let fresh = self.position + self.slots.range(self.position..).count() as u64;
        let offset = match chosen {
            Some(offset) => offset,
            None if fresh < log_len && fresh - self.position < self.config.max_in_flight as u64 => {
                let (below, floor) = self.rewound;
                self.slots.insert(
                    fresh,
                    MSlot {
                        attempt: if fresh < below { floor } else { 0 },
                        failures: 0,
                        phase: Phase::Ready(0),
                    },
                );
                fresh
            }
            None => return None,
        };
        let lease = self.config.lease_ms.map(|l| now + l);
        let slot = self.slots.get_mut(&offset).unwrap();
        if slot.attempt > 0 {
            self.counters.redeliveries += 1;
        }
        slot.attempt += 1;
        slot.phase = Phase::Owned(consumer.map(str::to_owned), lease);
        self.high = self.high.max(slot.attempt);
        self.frontier = self.frontier.max(offset + 1);
        let id = DeliveryId {
            offset,
            attempt: slot.attempt,
        };
        assert!(self.handed.insert(id), "{id} handed out twice");
        Some(id)
    }

    pub(crate) fn check(&self, id: DeliveryId) -> Result<(), Refused> {
        match self.slots.get(&id.offset) {
            Some(s) if s.attempt == id.attempt && matches!(s.phase, Phase::Owned(..)) => Ok(()),
            Some(s) if matches!(s.phase, Phase::Owned(..)) => Err(Refused::NotOwned(
                id,
                Some(DeliveryId {
                    offset: id.offset,
                    attempt: s.attempt,
                }),
            )),
            _ => Err(Refused::NotOwned(id, self.in_flight().first().copied())),
        }
    }

    pub(crate) fn nack(
        &mut self,
        id: DeliveryId,
        kind: NackKind,
        delay: Option<u64>,
        reason: Option<String>,
        now: u64,
    ) -> Result<Nack, Refused> {
        self.check(id)?;
        let config = self.config;
        let slot = self.slots.get_mut(&id.offset).unwrap();
        let ready_at = match kind {
            NackKind::Reject => None,
            NackKind::Release => {
                self.counters.releases += 1;
                Some(now + delay.unwrap_or(0))
            }
            NackKind::Nack => {
                slot.failures += 1;
                (slot.failures < config.max_attempts).then(|| {
                    now + delay.unwrap_or_else(|| backoff_ms(config.backoff, slot.failures))
                })
            }
        };
        match ready_at {
            Some(at) => {
                slot.phase = Phase::Ready(at);
                Ok(Nack::Retry)
            }
            None => {
                self.kill(id.offset, reason, now);
                Ok(Nack::DeadLettered)
            }
        }
    }

    pub(crate) fn take_dead(&mut self, range: &Range<u64>) -> Vec<(u64, u32, Option<String>, u64)> {
        let (taken, kept) = self.dead.drain(..).partition(|d| range.contains(&d.0));
        self.dead = kept;
        taken
    }

    pub(crate) fn info(&self, name: &str, log_len: u64, now: u64) -> GroupInfo {
        GroupInfo {
            name: name.to_owned(),
            position: self.position,
            attempt: self.slots.get(&self.position).map_or(0, |s| s.attempt),
            in_flight: self.in_flight().first().copied(),
            max_attempts: self.config.max_attempts,
            lag: log_len - self.position,
            dead_letters: self.dead.len() as u64,
            pause: self.pause_at(now),
        }
    }

    pub(crate) fn pause_at(&self, now: u64) -> Option<Pause> {
        match self.pause {
            Some(until_ms) if until_ms.is_none_or(|until| now < until) => Some(Pause { until_ms }),
            _ => None,
        }
    }

    /// The documented seek: everything unfinished is dropped; a seek below the frontier
    /// makes the offsets below it come back after the highest attempt used.
    pub(crate) fn seek(&mut self, position: u64) {
        if position < self.frontier {
            self.rewound = (self.frontier, self.high);
        }
        self.slots.clear();
        self.position = position;
    }

    /// The documented redrive of one dead letter: back after the highest attempt used if
    /// a seek may have delivered it again, and only where nothing unfinished holds it.
    pub(crate) fn revive(&mut self, offset: u64, attempts: u32) {
        self.counters.redrives += 1;
        let attempt = if offset < self.rewound.0 {
            attempts.max(self.high)
        } else {
            attempts
        };
        let revived = MSlot {
            attempt,
            failures: 0,
            phase: Phase::Ready(0),
        };
        match self.slots.get_mut(&offset) {
            None if offset < self.position => {
                self.slots.insert(offset, revived);
            }
            Some(slot) if offset >= self.position && slot.phase == Phase::Done => *slot = revived,
            _ => {}
        }
    }
}
