//! The faults injected around a step ([`Fault`]), how they are drawn, and how an
//! injected fault must surface.

use mailroom_store::StoreError;

use crate::rng::Rng;

/// A fault injected around one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Drop the store and reopen the same files (a process restart).
    Restart,
    /// A power cut between two steps: reopen what is durable.
    Crash,
    /// A power cut after this many changes inside the step's operation (torn writes).
    CutDuring(u64),
    /// The disk is full during the step's operation.
    Full,
    /// The next sync fails with `EIO`.
    SyncFails,
    /// The next write fails with `EIO`.
    WriteFails,
    /// Every sync of the step takes this many simulated milliseconds.
    SlowSyncs(u64),
    /// A bit flips in a durable file (checked on a copy, between steps).
    Flip,
}

pub fn draw_fault(rng: &mut Rng) -> Option<Fault> {
    Some(match rng.below(1000) {
        0..=9 => Fault::Restart,
        10..=29 => Fault::Crash,
        30..=59 => Fault::CutDuring(rng.below(12)),
        60..=74 => Fault::Full,
        75..=84 => Fault::SyncFails,
        85..=89 => Fault::WriteFails,
        90..=119 => Fault::SlowSyncs(1 + rng.below(40)),
        120..=134 => Fault::Flip,
        _ => return None,
    })
}

pub fn fault_index(fault: Fault) -> usize {
    match fault {
        Fault::Restart => 0,
        Fault::Crash => 1,
        Fault::CutDuring(_) => 2,
        Fault::Full => 3,
        Fault::SyncFails => 4,
        Fault::WriteFails => 5,
        Fault::SlowSyncs(_) => 6,
        Fault::Flip => 7,
    }
}

/// A store error's variant, for the trace.
pub fn kind(error: &StoreError) -> &'static str {
    match error {
        StoreError::Corrupt { .. } => "corrupt",
        StoreError::Io { .. } => "io",
        StoreError::FailStopped { .. } => "fail-stopped",
        _ => "other",
    }
}

/// An injected fault must surface as the error it is (or the fail-stop it caused).
pub fn check_typed(fault: Option<Fault>, error: &str) -> Result<(), String> {
    let expected: &[&str] = match fault {
        Some(Fault::Full) => &["No space left on device", "stopped accepting writes"],
        Some(Fault::CutDuring(_) | Fault::SyncFails | Fault::WriteFails) => {
            &["Input/output error", "stopped accepting writes"]
        }
        _ => &[],
    };
    if expected.iter().any(|text| error.contains(text)) {
        Ok(())
    } else {
        Err(format!("{fault:?} surfaced as {error:?}"))
    }
}
