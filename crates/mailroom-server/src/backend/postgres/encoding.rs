//! The bytes of `mailroom_groups.state`: a [`GroupSnapshot`] less its dead letters (which
//! are rows of their own, `mailroom_dead_letters`), plus the group's clock.
//!
//! Fixed-width little-endian, in this order: format `u8` (= [`FORMAT`]); `position u64`;
//! the settings (`max_attempts u32`, lease: `u8` 0/1 then `u64` if 1, backoff: `u8`
//! 0 none / 1 fixed `delay u64` / 2 exponential `base u64, cap u64`, `max_in_flight
//! u32`); the counters (`redeliveries, releases, expired_leases, redrives, purged`, each
//! `u64`); `clock_ms u64`, the latest time a transition of the group was planned at;
//! then the window and the redriven messages, each a `u32` count of slots. A slot is
//! `offset u64, attempt u32, failures u32, phase u8` and then for phase 0 (ready)
//! `not_before_ms u64`; for 1 (in flight) the consumer (`u8` 0/1, then `u16` length and
//! UTF-8 bytes) and the lease (`u8` 0/1, then `u64`); for 2 (done) nothing. Last, what
//! seek and pause keep (format 2): `frontier u64`, `rewound_below u64`, `attempt_floor
//! u32`, `attempts_high u32`, and the pause (`u8` 0 none / 1 until a resume / 2 until
//! `u64` ms). Format 1 (before seek and pause) was never released and is not read.
//!
//! Decoding checks the bytes only for shape; `GroupState::from_snapshot` checks that
//! what they say is a state the rules can reach.

use mailroom::group::{Backoff, GroupConfig, GroupCounters, GroupSnapshot, Pause, Slot, SlotPhase};

/// The format byte this binary writes and reads.
pub const FORMAT: u8 = 2;

/// A group's stored state: everything of its snapshot but the dead letters, and its clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    /// The snapshot, with `dead_letters` and `dead_letter_notes` empty.
    pub snapshot: GroupSnapshot,
    /// The latest time (ms) a transition of this group was planned at: the group's
    /// clock never goes back, even if the database's does.
    pub clock_ms: u64,
}

/// Why stored bytes could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored group state is damaged: {0}")]
pub struct DecodeError(pub &'static str);

/// The bytes of `snapshot` (its dead letters left out) and `clock_ms`.
pub fn encode(snapshot: &GroupSnapshot, clock_ms: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + 40 * snapshot.window.len());
    out.push(FORMAT);
    out.extend_from_slice(&snapshot.position.to_le_bytes());
    let config = &snapshot.config;
    out.extend_from_slice(&config.max_attempts.to_le_bytes());
    put_option(&mut out, config.lease_ms);
    match config.backoff {
        None => out.push(0),
        Some(Backoff::Fixed { delay_ms }) => {
            out.push(1);
            out.extend_from_slice(&delay_ms.to_le_bytes());
        }
        Some(Backoff::Exponential { base_ms, cap_ms }) => {
            out.push(2);
            out.extend_from_slice(&base_ms.to_le_bytes());
            out.extend_from_slice(&cap_ms.to_le_bytes());
        }
    }
    out.extend_from_slice(&config.max_in_flight.to_le_bytes());
    let c = &snapshot.counters;
    for counter in [
        c.redeliveries,
        c.releases,
        c.expired_leases,
        c.redrives,
        c.purged,
    ] {
        out.extend_from_slice(&counter.to_le_bytes());
    }
    out.extend_from_slice(&clock_ms.to_le_bytes());
    for slots in [&snapshot.window, &snapshot.redriven] {
        out.extend_from_slice(&(slots.len() as u32).to_le_bytes());
        for slot in slots {
            put_slot(&mut out, slot);
        }
    }
    out.extend_from_slice(&snapshot.frontier.to_le_bytes());
    out.extend_from_slice(&snapshot.rewound_below.to_le_bytes());
    out.extend_from_slice(&snapshot.attempt_floor.to_le_bytes());
    out.extend_from_slice(&snapshot.attempts_high.to_le_bytes());
    match snapshot.pause {
        None => out.push(0),
        Some(Pause { until_ms: None }) => out.push(1),
        Some(Pause {
            until_ms: Some(until_ms),
        }) => {
            out.push(2);
            out.extend_from_slice(&until_ms.to_le_bytes());
        }
    }
    out
}

fn put_option(out: &mut Vec<u8>, value: Option<u64>) {
    out.push(u8::from(value.is_some()));
    if let Some(value) = value {
        out.extend_from_slice(&value.to_le_bytes());
    }
}

fn put_slot(out: &mut Vec<u8>, slot: &Slot) {
    out.extend_from_slice(&slot.offset.to_le_bytes());
    out.extend_from_slice(&slot.attempt.to_le_bytes());
    out.extend_from_slice(&slot.failures.to_le_bytes());
    match &slot.phase {
        SlotPhase::Ready { not_before_ms } => {
            out.push(0);
            out.extend_from_slice(&not_before_ms.to_le_bytes());
        }
        SlotPhase::InFlight {
            consumer,
            lease_until_ms,
        } => {
            out.push(1);
            out.push(u8::from(consumer.is_some()));
            if let Some(consumer) = consumer {
                // Consumer names are checked against CONSUMER_BYTES_MAX, far below u16.
                out.extend_from_slice(&(consumer.len() as u16).to_le_bytes());
                out.extend_from_slice(consumer.as_bytes());
            }
            put_option(out, *lease_until_ms);
        }
        SlotPhase::Done => out.push(2),
    }
}

/// Reads stored bytes back; the snapshot's dead letters are left empty (they are rows of
/// their own: `group.rs`, `Cached`).
///
/// # Errors
/// [`DecodeError`] for bytes of another format, cut short, or with trailing bytes.
pub fn decode(bytes: &[u8]) -> Result<StoredState, DecodeError> {
    let mut reader = Reader(bytes);
    if reader.u8()? != FORMAT {
        return Err(DecodeError("unknown format"));
    }
    let position = reader.u64()?;
    let max_attempts = reader.u32()?;
    let lease_ms = reader.option()?;
    let backoff = match reader.u8()? {
        0 => None,
        1 => Some(Backoff::Fixed {
            delay_ms: reader.u64()?,
        }),
        2 => Some(Backoff::Exponential {
            base_ms: reader.u64()?,
            cap_ms: reader.u64()?,
        }),
        _ => return Err(DecodeError("unknown backoff")),
    };
    let config = GroupConfig {
        max_attempts,
        lease_ms,
        backoff,
        max_in_flight: reader.u32()?,
    };
    let counters = GroupCounters {
        redeliveries: reader.u64()?,
        releases: reader.u64()?,
        expired_leases: reader.u64()?,
        redrives: reader.u64()?,
        purged: reader.u64()?,
    };
    let clock_ms = reader.u64()?;
    let window = reader.slots()?;
    let redriven = reader.slots()?;
    let frontier = reader.u64()?;
    let rewound_below = reader.u64()?;
    let attempt_floor = reader.u32()?;
    let attempts_high = reader.u32()?;
    let pause = match reader.u8()? {
        0 => None,
        1 => Some(Pause { until_ms: None }),
        2 => Some(Pause {
            until_ms: Some(reader.u64()?),
        }),
        _ => return Err(DecodeError("unknown pause")),
    };
    if !reader.0.is_empty() {
        return Err(DecodeError("trailing bytes"));
    }
    let head = window.first().map_or((0, false), |slot| {
        let in_flight = matches!(slot.phase, SlotPhase::InFlight { .. });
        (slot.attempt, in_flight)
    });
    let snapshot = GroupSnapshot {
        position,
        attempt: head.0,
        in_flight: head.1,
        max_attempts,
        dead_letters: Vec::new(),
        config,
        window,
        redriven,
        dead_letter_notes: Vec::new(),
        counters,
        frontier,
        rewound_below,
        attempt_floor,
        attempts_high,
        pause,
    };
    Ok(StoredState { snapshot, clock_ms })
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let Some((head, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(DecodeError("cut short"));
        };
        self.0 = rest;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn option(&mut self) -> Result<Option<u64>, DecodeError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.u64()?)),
            _ => Err(DecodeError("bad option tag")),
        }
    }

    fn slots(&mut self) -> Result<Vec<Slot>, DecodeError> {
        let count = self.u32()? as usize;
        // Each slot takes at least 17 bytes: a count beyond that is damage, not a reason
        // to allocate.
        if count > self.0.len() / 17 {
            return Err(DecodeError("slot count beyond the bytes"));
        }
        (0..count).map(|_| self.slot()).collect()
    }

    fn slot(&mut self) -> Result<Slot, DecodeError> {
        let offset = self.u64()?;
        let attempt = self.u32()?;
        let failures = self.u32()?;
        let phase = match self.u8()? {
            0 => SlotPhase::Ready {
                not_before_ms: self.u64()?,
            },
            1 => {
                let consumer = match self.u8()? {
                    0 => None,
                    1 => {
                        let len = u16::from_le_bytes(self.take()?) as usize;
                        if len > self.0.len() {
                            return Err(DecodeError("cut short"));
                        }
                        let (name, rest) = self.0.split_at(len);
                        self.0 = rest;
                        let name = std::str::from_utf8(name)
                            .map_err(|_| DecodeError("consumer is not UTF-8"))?;
                        Some(name.to_owned())
                    }
                    _ => return Err(DecodeError("bad consumer tag")),
                };
                SlotPhase::InFlight {
                    consumer,
                    lease_until_ms: self.option()?,
                }
            }
            2 => SlotPhase::Done,
            _ => return Err(DecodeError("unknown slot phase")),
        };
        Ok(Slot {
            offset,
            attempt,
            failures,
            phase,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mailroom::group::{GroupState, PollStep};

    // Proves a group with leases, consumers, backoff and W > 1 round-trips through the
    // bytes, and that bytes cut anywhere are refused rather than misread.
    #[test]
    fn state_round_trips_and_cut_bytes_are_refused() {
        let config = GroupConfig::new(3)
            .with_lease_ms(500)
            .with_backoff(Backoff::Exponential {
                base_ms: 10,
                cap_ms: 80,
            })
            .with_max_in_flight(4);
        let mut group = GroupState::with_config(config, 2).unwrap();
        for consumer in [Some("a"), None, Some("bee")] {
            let PollStep::Deliver(new) = group.plan_poll(10, 7, consumer) else {
                panic!("expected a delivery");
            };
            group.apply_delivery(new, consumer).unwrap();
        }
        let snapshot = group.snapshot();
        let bytes = encode(&snapshot, 1234);
        let stored = decode(&bytes).unwrap();
        assert_eq!(stored.clock_ms, 1234);
        assert_eq!(GroupState::from_snapshot(stored.snapshot).unwrap(), group);
        for cut in 0..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}
