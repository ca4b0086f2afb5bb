//! The harness: the real `Topic` and the model side by side, one operation at a time,
//! compared after every step.

use super::*;

pub(crate) struct Harness {
    pub(crate) clock: Arc<ManualClock>,
    pub(crate) topic: Topic<u32>,
    pub(crate) log: Vec<u32>,
    pub(crate) groups: BTreeMap<String, MGroup>,
    pub(crate) last: BTreeMap<(usize, usize), DeliveryId>,
    pub(crate) last_batch: BTreeMap<(usize, usize), Vec<DeliveryId>>,
    pub(crate) seen: Vec<DeliveryId>,
}

impl Harness {
    pub(crate) fn new() -> Harness {
        let clock = Arc::new(ManualClock::new(1_000));
        Harness {
            topic: Topic::with_clock(clock.clone()),
            clock,
            log: Vec::new(),
            groups: BTreeMap::new(),
            last: BTreeMap::new(),
            last_batch: BTreeMap::new(),
            seen: Vec::new(),
        }
    }

    pub(crate) fn now(&self) -> u64 {
        use mailroom::clock::Clock;
        self.clock.now_ms()
    }

    pub(crate) fn pick(&self, name: usize, pick: &Pick) -> DeliveryId {
        match pick {
            Pick::Last(consumer) => {
                self.last
                    .get(&(name, *consumer))
                    .copied()
                    .unwrap_or(DeliveryId {
                        offset: 0,
                        attempt: 1,
                    })
            }
            Pick::Seen(i) if !self.seen.is_empty() => self.seen[i % self.seen.len()],
            Pick::Seen(_) => DeliveryId {
                offset: 0,
                attempt: 0,
            },
            Pick::MadeUp(offset, attempt) => DeliveryId {
                offset: *offset,
                attempt: *attempt,
            },
        }
    }

    pub(crate) fn pick_many(&self, name: usize, picks: &[BatchPick]) -> Vec<DeliveryId> {
        picks
            .iter()
            .flat_map(|pick| match pick {
                BatchPick::One(pick) => vec![self.pick(name, pick)],
                BatchPick::LastBatch(consumer) => self
                    .last_batch
                    .get(&(name, *consumer))
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect()
    }

    /// The model group `name` after expiring its due leases, or `Unknown`.
    pub(crate) fn group(&mut self, name: &str) -> Result<&mut MGroup, Refused> {
        let now = self.now();
        let group = self.groups.get_mut(name).ok_or(Refused::Unknown)?;
        group.expire(now);
        Ok(group)
    }

    pub(crate) fn step(&mut self, op: &Op) {
        let now = self.now();
        match op {
            Op::Publish(message) => {
                assert_eq!(self.topic.publish(*message), self.log.len() as u64);
                self.log.push(*message);
            }
            Op::Create(n, config) => {
                let name = NAMES[*n];
                let expected = if self.groups.contains_key(name) {
                    Err(Refused::Exists)
                } else {
                    let group = MGroup {
                        config: *config,
                        position: 0,
                        slots: BTreeMap::new(),
                        dead: Vec::new(),
                        counters: GroupCounters::default(),
                        frontier: 0,
                        high: 0,
                        rewound: (0, 0),
                        pause: None,
                        handed: BTreeSet::new(),
                    };
                    self.groups.insert(name.to_owned(), group);
                    Ok(())
                };
                let real = self
                    .topic
                    .create_group_with(name, StartPosition::Earliest, *config);
                assert_eq!(real.map_err(refused), expected);
            }
            Op::Poll(n, c) => {
                let name = NAMES[*n];
                let log_len = self.log.len() as u64;
                let expected = self
                    .group(name)
                    .map(|g| g.poll(log_len, now, CONSUMERS[*c]))
                    .map(|id| {
                        id.map(|id| Delivery {
                            offset: id.offset,
                            attempt: id.attempt,
                            message: self.log[id.offset as usize],
                        })
                    });
                let real = match CONSUMERS[*c] {
                    None => self.topic.poll(name),
                    Some(consumer) => self.topic.poll_as(name, consumer),
                };
                let real = real.map_err(refused);
                assert_eq!(real, expected);
                if let Ok(Some(delivery)) = real {
                    self.last.insert((*n, *c), delivery.id());
                    self.seen.push(delivery.id());
                }
            }
            Op::Ack(n, pick) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self.group(name).and_then(|g| {
                    g.check(id)?;
                    g.finish(id.offset);
                    Ok(())
                });
                assert_eq!(self.topic.ack(name, id).map_err(refused), expected);
            }
            Op::Nack(n, pick, kind, delay, reason) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self
                    .group(name)
                    .and_then(|g| g.nack(id, *kind, *delay, reason.clone(), now));
                let options = NackOptions {
                    kind: *kind,
                    delay_ms: *delay,
                    reason: reason.clone(),
                };
                assert_eq!(
                    self.topic.nack_with(name, id, options).map_err(refused),
                    expected
                );
            }
            Op::Touch(n, pick) => {
                let name = NAMES[*n];
                let id = self.pick(*n, pick);
                let expected = self.group(name).and_then(|g| {
                    g.check(id)?;
                    let lease = g.config.lease_ms;
                    if let Phase::Owned(_, deadline) =
                        &mut g.slots.get_mut(&id.offset).unwrap().phase
                    {
                        *deadline = lease.map(|l| now + l);
                    }
                    Ok(())
                });
                assert_eq!(self.topic.touch(name, id).map_err(refused), expected);
            }
            Op::Advance(ms) => self.clock.advance_ms(*ms),
            Op::PollBatch(n, c, max) => self.poll_batch(*n, *c, *max),
            Op::AckBatch(n, picks) => {
                let name = NAMES[*n];
                let ids = self.pick_many(*n, picks);
                let expected = self.group(name).map(|g| {
                    ids.iter()
                        .map(|&id| {
                            g.check(id)?;
                            g.finish(id.offset);
                            Ok(())
                        })
                        .collect::<Vec<_>>()
                });
                let real = self.topic.ack_batch(name, &ids);
                assert_eq!(batch_results(real), expected);
            }
            Op::NackBatch(n, picks, kind, delay, reason) => {
                let name = NAMES[*n];
                let ids = self.pick_many(*n, picks);
                let expected = self.group(name).map(|g| {
                    ids.iter()
                        .map(|&id| g.nack(id, *kind, *delay, reason.clone(), now))
                        .collect::<Vec<_>>()
                });
                let options = NackOptions {
                    kind: *kind,
                    delay_ms: *delay,
                    reason: reason.clone(),
                };
                let real = self.topic.nack_batch(name, &ids, &options);
                assert_eq!(batch_results(real), expected);
            }
            Op::Redrive(n, range) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| {
                    let taken = g.take_dead(range);
                    for (offset, attempts, _, _) in &taken {
                        g.revive(*offset, *attempts);
                    }
                    taken.len() as u64
                });
                assert_eq!(
                    self.topic.redrive(name, range.clone()).map_err(refused),
                    expected
                );
            }
            Op::Seek(..) | Op::Pause(..) | Op::Resume(_) => self.step_move(op),
            Op::Purge(n, range) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| {
                    let taken = g.take_dead(range).len() as u64;
                    g.counters.purged += taken;
                    taken
                });
                assert_eq!(
                    self.topic.purge(name, range.clone()).map_err(refused),
                    expected
                );
            }
        }
        self.compare_all();
    }

    pub(crate) fn step_move(&mut self, op: &Op) {
        let now = self.now();
        let log_len = self.log.len() as u64;
        match op {
            Op::Seek(n, to) => {
                let name = NAMES[*n];
                let position = match *to {
                    StartPosition::Earliest => Some(0),
                    StartPosition::Latest => Some(log_len),
                    StartPosition::Offset(offset) => (offset <= log_len).then_some(offset),
                };
                let expected = self.group(name).and_then(|g| {
                    let position = position.ok_or(Refused::Invalid)?;
                    g.seek(position);
                    Ok(position)
                });
                assert_eq!(self.topic.seek(name, *to).map_err(refused), expected);
            }
            Op::Pause(n, length) => {
                let name = NAMES[*n];
                let until = length.map(|l| now + l);
                let expected = self.group(name).and_then(|g| match until {
                    Some(until) if until <= now => Err(Refused::Invalid),
                    _ => {
                        g.pause = Some(until);
                        Ok(())
                    }
                });
                assert_eq!(self.topic.pause(name, until).map_err(refused), expected);
            }
            Op::Resume(n) => {
                let name = NAMES[*n];
                let expected = self.group(name).map(|g| g.pause.take().is_some());
                assert_eq!(self.topic.resume(name).map_err(refused), expected);
            }
            _ => unreachable!("step_move of {op:?}"),
        }
    }

    pub(crate) fn poll_batch(&mut self, n: usize, c: usize, max: usize) {
        let (name, consumer) = (NAMES[n], CONSUMERS[c]);
        let log_len = self.log.len() as u64;
        let now = self.now();
        let expected = if max == 0 || max > BATCH_DELIVERIES_MAX {
            Err(Refused::Invalid)
        } else {
            self.group(name)
                .map(|g| g.poll_batch(log_len, now, consumer, max))
        };
        let expected = expected.map(|ids| {
            ids.into_iter()
                .map(|id| Delivery {
                    offset: id.offset,
                    attempt: id.attempt,
                    message: self.log[id.offset as usize],
                })
                .collect::<Vec<_>>()
        });
        let real = self.topic.poll_batch(name, consumer, max).map_err(refused);
        assert_eq!(real, expected);
        if let Ok(batch) = real {
            let ids: Vec<DeliveryId> = batch.iter().map(Delivery::id).collect();
            if let Some(&last) = ids.last() {
                self.last.insert((n, c), last);
            }
            self.seen.extend(&ids);
            self.last_batch.insert((n, c), ids);
        }
    }

    pub(crate) fn compare_all(&mut self) {
        let log_len = self.log.len() as u64;
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let log = self.log.clone();
            let group = self.group(&name).unwrap().clone();
            assert_eq!(
                self.topic.group_info(&name).unwrap(),
                group.info(&name, log_len, self.now()),
                "group {name}"
            );
            assert_eq!(
                self.topic.in_flight(&name).unwrap(),
                group.in_flight(),
                "group {name}"
            );
            assert_eq!(
                self.topic.group_counters(&name).unwrap(),
                group.counters,
                "group {name}"
            );
            let dead: Vec<DeadLetterInfo<u32>> = group
                .dead
                .iter()
                .map(|(offset, attempts, reason, at_ms)| DeadLetterInfo {
                    offset: *offset,
                    attempts: *attempts,
                    reason: reason.clone(),
                    at_ms: *at_ms,
                    message: log[*offset as usize],
                })
                .collect();
            assert_eq!(
                self.topic.dead_letter_info(&name).unwrap(),
                dead,
                "group {name}"
            );
        }
    }
}

/// A batch's answer in the model's terms.
pub(crate) fn batch_results<T>(
    real: Result<Vec<Result<T, NotOwned>>, TopicError>,
) -> Result<Vec<Result<T, Refused>>, Refused> {
    real.map_err(refused).map(|results| {
        results
            .into_iter()
            .map(|r| r.map_err(|n| Refused::NotOwned(n.requested, n.current)))
            .collect()
    })
}
