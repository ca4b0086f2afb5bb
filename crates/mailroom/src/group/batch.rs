//! The batch poll, planned once for every home of a group.
//!
//! A batch poll by one consumer hands out, in this order: first the consumer's own
//! deliveries in flight (redriven messages first, then by offset), then new deliveries
//! until the batch holds `max` or the group has nothing more to hand out (idle, full, or
//! a lower message waiting out a delay). Lease expiries that come due while planning are
//! applied as they are met, before the delivery they would precede.
//!
//! [`plan_batch_new`] is the same poll without the first part: only new deliveries,
//! with the consumer's own in flight counted against `max` (a consume stream's refill).
//!
//! [`plan_batch`] walks that order on a [`GroupState`] and hands each step to the home
//! through [`BatchHome`]: the home fetches the payload, decides whether it still fits,
//! and performs the change its own way (the in-memory topic applies it at once; the
//! durable store stages its record for the write, then applies it). The planner never
//! changes the state itself, so a home that must persist a change before applying it
//! can.

use super::{Change, DeliveryId, GroupState, NewDelivery, PollStep, WindowScan};

/// What a batch poll asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPoll<'a> {
    /// The polling consumer (`None`: the anonymous consumer).
    pub consumer: Option<&'a str>,
    /// The most deliveries to hand out (at least 1).
    pub max: usize,
    /// The next offset of the log.
    pub log_end: u64,
    /// The caller's time (ms).
    pub now_ms: u64,
}

/// What a home did with a delivery the planner offered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// The delivery is in the batch (a new one was made).
    Taken,
    /// The batch ends before this delivery (say, it would pass a byte budget): an owned
    /// delivery stays in flight for the next poll, a new one is not made.
    Declined,
    /// The message is gone (retention deleted it): the batch ends here, and the home
    /// decides what to do about it.
    Vanished,
}

/// How a batch poll ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnd {
    /// It ran to `max`, to a declined delivery, or to the group having nothing more.
    Done,
    /// A message vanished under it ([`Offer::Vanished`]).
    Vanished,
}

/// A home's side of a batch poll: its view of the state and how it performs each step.
pub trait BatchHome {
    /// What a step may fail with (the in-memory topic: nothing; the store: I/O).
    type Error;

    /// The group's state, as every step so far left it.
    fn state(&self) -> &GroupState;

    /// Performs a due lease expiry (planned on [`state`](Self::state)).
    ///
    /// # Errors
    ///
    /// Whatever the home's write can fail with; the batch stops with it.
    fn expire(&mut self, change: Change) -> Result<(), Self::Error>;

    /// Plans the next new delivery at `now_ms` against a log ending at `log_end`: by
    /// default [`GroupState::plan_poll_new`] on [`state`](Self::state), for a log without
    /// keys. A home whose messages carry keys plans with
    /// [`GroupState::plan_poll_new_keyed`] and its own [`KeyLookup`](super::KeyLookup).
    ///
    /// # Errors
    ///
    /// Whatever reading the keys can fail with; the batch stops with it.
    fn plan_new(&mut self, log_end: u64, now_ms: u64) -> Result<PollStep, Self::Error> {
        Ok(self.state().plan_poll_new(log_end, now_ms))
    }

    /// [`plan_new`](Self::plan_new) for the next delivery of a batch, with the batch's
    /// [`WindowScan`]: by default `plan_new`, which plans from scratch. A home whose
    /// messages carry keys plans with [`GroupState::plan_poll_new_scanned`] here, which
    /// answers the same and keeps a batch linear in the window.
    ///
    /// # Errors
    ///
    /// As [`plan_new`](Self::plan_new).
    fn plan_new_scanned(
        &mut self,
        log_end: u64,
        now_ms: u64,
        scan: &mut WindowScan,
    ) -> Result<PollStep, Self::Error> {
        let _ = scan;
        self.plan_new(log_end, now_ms)
    }

    /// Adds the consumer's own delivery `id`, already in flight, to the batch.
    ///
    /// # Errors
    ///
    /// Whatever the home's read can fail with; the batch stops with it.
    fn owned(&mut self, id: DeliveryId) -> Result<Offer, Self::Error>;

    /// Makes the new delivery `new` (planned on [`state`](Self::state)) for the polling
    /// consumer and adds it to the batch, or declines it.
    ///
    /// # Errors
    ///
    /// Whatever the home's read or write can fail with; the batch stops with it.
    fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Self::Error>;
}

/// Plans a batch poll on `home` (see the module docs), handing it each step in order.
///
/// # Errors
///
/// The first error a step of `home` returns.
///
/// # Example
///
/// ```
/// use mailroom::group::{
///     plan_batch, BatchEnd, BatchHome, BatchPoll, Change, DeliveryId, GroupConfig, GroupState,
///     NewDelivery, Offer,
/// };
///
/// // A home that applies every step at once and collects the ids.
/// struct Memory(GroupState, Vec<DeliveryId>);
///
/// impl BatchHome for Memory {
///     type Error = std::convert::Infallible;
///     fn state(&self) -> &GroupState {
///         &self.0
///     }
///     fn expire(&mut self, change: Change) -> Result<(), Self::Error> {
///         self.0.apply_change(&change).unwrap();
///         Ok(())
///     }
///     fn owned(&mut self, id: DeliveryId) -> Result<Offer, Self::Error> {
///         self.1.push(id);
///         Ok(Offer::Taken)
///     }
///     fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Self::Error> {
///         self.0.apply_delivery(new, Some("a")).unwrap();
///         self.1.push(new.id);
///         Ok(Offer::Taken)
///     }
/// }
///
/// let state = GroupState::with_config(GroupConfig::new(3).with_max_in_flight(4), 0).unwrap();
/// let mut home = Memory(state, Vec::new());
/// let poll = BatchPoll { consumer: Some("a"), max: 3, log_end: 2, now_ms: 0 };
/// // Two messages: the batch stops when the log runs out.
/// assert_eq!(plan_batch(&mut home, &poll), Ok(BatchEnd::Done));
/// assert_eq!(home.1.len(), 2);
/// // Polled again, "a" gets its own two back first.
/// home.1.clear();
/// plan_batch(&mut home, &poll).unwrap();
/// assert_eq!(home.1.iter().map(|id| id.offset).collect::<Vec<_>>(), [0, 1]);
/// ```
pub fn plan_batch<H: BatchHome>(home: &mut H, poll: &BatchPoll<'_>) -> Result<BatchEnd, H::Error> {
    let owned: Vec<DeliveryId> = home.state().owned(poll.consumer).take(poll.max).collect();
    let mut taken = 0;
    for id in owned {
        match home.owned(id)? {
            Offer::Taken => taken += 1,
            Offer::Declined => return Ok(BatchEnd::Done),
            Offer::Vanished => return Ok(BatchEnd::Vanished),
        }
    }
    plan_new_deliveries(home, poll, taken)
}

/// Plans a batch poll of new deliveries only on `home`: what [`plan_batch`] hands out
/// after the consumer's own deliveries, with those left out. The consumer's deliveries
/// already in flight count against `poll.max`, so the consumer never holds more than
/// `max` once the batch is made: a consumer with `max` unsettled deliveries gets
/// nothing, one with `n` gets at most `max - n` new ones. Nothing it owns is handed out
/// (or read) again; a delivery of its whose lease ran out may come back as a new
/// attempt, as to any consumer.
///
/// This is the refill of a consumer that keeps its deliveries itself (a consume
/// stream): it asks for its window and gets only what it has not seen. Every other
/// rule (order, expiries, `max_in_flight`, keys, delays) is [`plan_batch`]'s.
///
/// # Errors
///
/// The first error a step of `home` returns.
///
/// # Example
///
/// ```
/// use mailroom::group::{
///     plan_batch, plan_batch_new, BatchHome, BatchPoll, Change, DeliveryId, GroupConfig,
///     GroupState, NewDelivery, Offer,
/// };
///
/// struct Memory(GroupState, Vec<DeliveryId>);
///
/// impl BatchHome for Memory {
///     type Error = std::convert::Infallible;
///     fn state(&self) -> &GroupState {
///         &self.0
///     }
///     fn expire(&mut self, change: Change) -> Result<(), Self::Error> {
///         self.0.apply_change(&change).unwrap();
///         Ok(())
///     }
///     fn owned(&mut self, id: DeliveryId) -> Result<Offer, Self::Error> {
///         self.1.push(id);
///         Ok(Offer::Taken)
///     }
///     fn deliver(&mut self, new: NewDelivery) -> Result<Offer, Self::Error> {
///         self.0.apply_delivery(new, Some("a")).unwrap();
///         self.1.push(new.id);
///         Ok(Offer::Taken)
///     }
/// }
///
/// let state = GroupState::with_config(GroupConfig::new(3).with_max_in_flight(8), 0).unwrap();
/// let mut home = Memory(state, Vec::new());
/// let window = |max| BatchPoll { consumer: Some("a"), max, log_end: 10, now_ms: 0 };
/// plan_batch(&mut home, &window(2)).unwrap();
/// home.1.clear();
/// // "a" holds 0 and 1: a window of 4 gets two new ones, none of its own again.
/// plan_batch_new(&mut home, &window(4)).unwrap();
/// assert_eq!(home.1.iter().map(|id| id.offset).collect::<Vec<_>>(), [2, 3]);
/// home.1.clear();
/// // Now it holds 4: nothing more.
/// plan_batch_new(&mut home, &window(4)).unwrap();
/// assert!(home.1.is_empty());
/// ```
pub fn plan_batch_new<H: BatchHome>(
    home: &mut H,
    poll: &BatchPoll<'_>,
) -> Result<BatchEnd, H::Error> {
    let held = home.state().owned(poll.consumer).count();
    plan_new_deliveries(home, poll, held)
}

/// The new deliveries of a batch, after `taken` (delivered or held) count against
/// `poll.max`.
fn plan_new_deliveries<H: BatchHome>(
    home: &mut H,
    poll: &BatchPoll<'_>,
    mut taken: usize,
) -> Result<BatchEnd, H::Error> {
    // The walk of the window goes on from one delivery to the next (see `window_scan.rs`).
    let mut scan = WindowScan::default();
    while taken < poll.max {
        let new = match home.plan_new_scanned(poll.log_end, poll.now_ms, &mut scan)? {
            PollStep::Idle | PollStep::Full | PollStep::Wait { .. } => break,
            PollStep::Expire(change) => {
                scan = WindowScan::default();
                home.expire(change)?;
                continue;
            }
            PollStep::InFlight(id) => unreachable!("plan_poll_new planned in-flight {id}"),
            PollStep::Deliver(new) => new,
        };
        match home.deliver(new)? {
            Offer::Taken => taken += 1,
            Offer::Declined => break,
            Offer::Vanished => return Ok(BatchEnd::Vanished),
        }
    }
    Ok(BatchEnd::Done)
}
