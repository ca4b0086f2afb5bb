//! The correctness check of the log workloads: what each group should see, what it saw, and
//! the verdict.
//!
//! A run publishes messages `0..count`. The failure plan picks which of them the consumer
//! rejects every time (so they must end up dead-lettered after exactly `max_attempts`
//! deliveries); all others are acked on their first delivery. In a clean run (no crash, no
//! timeout) no system's semantics allow a second delivery of an acked message, so any
//! duplicate is a failure, and so is a lost message, a wrong attempt number, a corrupt
//! payload, or a dead-letter queue that differs from the planned set by even one entry.

use serde::{Deserialize, Serialize};

/// The most problems a verdict lists by example; the counts are always exact.
pub const PROBLEM_EXAMPLES_MAX: usize = 5;

/// Which messages the consumer rejects until they are dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FailurePlan {
    /// Ack everything.
    None,
    /// Reject every message whose sequence number is a multiple of this (10 = 10%).
    EveryNth(u64),
}

impl FailurePlan {
    /// Whether message `seq` is one the consumer rejects.
    ///
    /// ```
    /// use mailroom_bench::ledger::FailurePlan;
    /// assert!(FailurePlan::EveryNth(10).fails(20));
    /// assert!(!FailurePlan::EveryNth(10).fails(21));
    /// assert!(!FailurePlan::None.fails(0));
    /// ```
    pub fn fails(self, seq: u64) -> bool {
        match self {
            FailurePlan::None => false,
            FailurePlan::EveryNth(n) => n > 0 && seq.is_multiple_of(n),
        }
    }

    /// How many of `0..count` fail.
    pub fn failing_count(self, count: u64) -> u64 {
        match self {
            FailurePlan::None | FailurePlan::EveryNth(0) => 0,
            FailurePlan::EveryNth(n) => count.div_ceil(n),
        }
    }
}

/// The outcome of a run's correctness check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// True when nothing below was found.
    pub passed: bool,
    /// One line per kind of problem, with its exact count and a few examples.
    pub problems: Vec<String>,
}

impl Verdict {
    /// A verdict from a list of problems: passed when there are none.
    pub fn from_problems(problems: Vec<String>) -> Verdict {
        Verdict {
            passed: problems.is_empty(),
            problems,
        }
    }

    /// Both verdicts together: passed only if both passed.
    pub fn and(mut self, other: Verdict) -> Verdict {
        self.passed &= other.passed;
        self.problems.extend(other.problems);
        self
    }
}

/// One group's record of a run.
#[derive(Debug, Clone)]
pub struct GroupLedger {
    group: String,
    plan: FailurePlan,
    max_attempts: u32,
    deliveries: Vec<u32>,
    acks: Vec<u32>,
    finished: u64,
    phantoms: Vec<u64>,
    wrong_attempts: Vec<(u64, u32, u32)>,
    corrupt: u64,
}

impl GroupLedger {
    /// A ledger for `group` expecting messages `0..count`.
    pub fn new(group: &str, count: u64, plan: FailurePlan, max_attempts: u32) -> GroupLedger {
        let slots = usize::try_from(count).expect("count fits in memory");
        GroupLedger {
            group: group.to_owned(),
            plan,
            max_attempts,
            deliveries: vec![0; slots],
            acks: vec![0; slots],
            finished: 0,
            phantoms: Vec::new(),
            wrong_attempts: Vec::new(),
            corrupt: 0,
        }
    }

    /// Records a delivery of `seq` that the system numbered `attempt`, and says whether
    /// the consumer should reject it. A sequence number outside the run is recorded as a
    /// phantom and rejected-as-not-ours by returning `None`.
    pub fn delivered(&mut self, seq: u64, attempt: u32) -> Option<bool> {
        let Some(slot) = self.slot(seq) else {
            self.phantoms.push(seq);
            return None;
        };
        self.deliveries[slot] += 1;
        let seen = self.deliveries[slot];
        if attempt != seen {
            self.wrong_attempts.push((seq, attempt, seen));
        }
        let reject = self.plan.fails(seq);
        if reject && seen == self.max_attempts {
            // The final rejection finishes the message: it must now be dead-lettered.
            self.finished += 1;
        }
        Some(reject)
    }

    /// Records an ack of `seq`.
    pub fn acked(&mut self, seq: u64) {
        if let Some(slot) = self.slot(seq) {
            self.acks[slot] += 1;
            if self.acks[slot] == 1 {
                self.finished += 1;
            }
        }
    }

    /// Records a payload that failed to decode.
    pub fn corrupt(&mut self) {
        self.corrupt += 1;
    }

    /// Whether every message is acked or finally rejected.
    pub fn is_done(&self) -> bool {
        self.finished >= self.deliveries.len() as u64
    }

    /// Messages acked or finally rejected so far.
    pub fn finished(&self) -> u64 {
        self.finished
    }

    /// The group's name.
    pub fn group(&self) -> &str {
        &self.group
    }

    /// Messages not yet acked or finally rejected.
    pub fn unfinished(&self) -> u64 {
        (self.deliveries.len() as u64).saturating_sub(self.finished)
    }

    /// Deliveries seen so far, retries included.
    pub fn deliveries_total(&self) -> u64 {
        self.deliveries.iter().map(|&n| u64::from(n)).sum()
    }

    fn slot(&self, seq: u64) -> Option<usize> {
        usize::try_from(seq)
            .ok()
            .filter(|&slot| slot < self.deliveries.len())
    }

    /// The verdict, given the sequence numbers found in the group's dead-letter queue.
    pub fn verdict(&self, dead_letters: &[u64]) -> Verdict {
        let mut problems = Vec::new();
        let mut lost = Vec::new();
        let mut duplicated = Vec::new();
        let mut short_retried = Vec::new();
        let mut acked_failing = Vec::new();
        for (slot, (&delivered, &acked)) in self.deliveries.iter().zip(&self.acks).enumerate() {
            let seq = slot as u64;
            if self.plan.fails(seq) {
                if acked > 0 {
                    acked_failing.push(seq);
                } else if delivered != self.max_attempts {
                    short_retried.push((seq, delivered));
                }
            } else if delivered == 0 || acked == 0 {
                lost.push(seq);
            } else if delivered > 1 || acked > 1 {
                duplicated.push(seq);
            }
        }
        let name = &self.group;
        note(
            &mut problems,
            &format!("{name}: lost (never delivered and acked)"),
            &lost,
        );
        note(
            &mut problems,
            &format!("{name}: duplicated deliveries"),
            &duplicated,
        );
        note(&mut problems, &format!("{name}: rejected messages not delivered exactly max_attempts times (seq, deliveries)"), &short_retried);
        note(
            &mut problems,
            &format!("{name}: acked although the plan rejects them"),
            &acked_failing,
        );
        note(
            &mut problems,
            &format!("{name}: phantom sequence numbers"),
            &self.phantoms,
        );
        note(&mut problems, &format!("{name}: attempt numbers that disagree with the deliveries seen (seq, reported, seen)"), &self.wrong_attempts);
        if self.corrupt > 0 {
            problems.push(format!("{name}: {} corrupt payloads", self.corrupt));
        }
        problems.extend(self.dead_letter_problems(dead_letters));
        Verdict::from_problems(problems)
    }

    fn dead_letter_problems(&self, dead_letters: &[u64]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = vec![0u32; self.deliveries.len()];
        let mut outside = Vec::new();
        for &seq in dead_letters {
            match self.slot(seq) {
                Some(slot) if self.plan.fails(seq) => seen[slot] += 1,
                _ => outside.push(seq),
            }
        }
        let mut missing = Vec::new();
        let mut twice = Vec::new();
        for (slot, &times) in seen.iter().enumerate() {
            let seq = slot as u64;
            if self.plan.fails(seq) && times == 0 {
                missing.push(seq);
            } else if times > 1 {
                twice.push(seq);
            }
        }
        let name = &self.group;
        let expected = self.plan.failing_count(self.deliveries.len() as u64);
        if dead_letters.len() as u64 != expected {
            problems.push(format!(
                "{name}: dead-letter count {} but {expected} expected",
                dead_letters.len()
            ));
        }
        note(
            &mut problems,
            &format!("{name}: dead-lettered but should have been acked"),
            &outside,
        );
        note(
            &mut problems,
            &format!("{name}: missing from the dead-letter queue"),
            &missing,
        );
        note(
            &mut problems,
            &format!("{name}: dead-lettered more than once"),
            &twice,
        );
        problems
    }
}

fn note<T: std::fmt::Debug>(problems: &mut Vec<String>, what: &str, found: &[T]) {
    if !found.is_empty() {
        let examples: Vec<_> = found.iter().take(PROBLEM_EXAMPLES_MAX).collect();
        problems.push(format!("{what}: {} e.g. {examples:?}", found.len()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_clean(ledger: &mut GroupLedger, count: u64, max_attempts: u32) -> Vec<u64> {
        let mut dead = Vec::new();
        for seq in 0..count {
            for attempt in 1..=max_attempts {
                if ledger.delivered(seq, attempt) == Some(false) {
                    ledger.acked(seq);
                    break;
                }
                if attempt == max_attempts {
                    dead.push(seq);
                }
            }
        }
        dead
    }

    // Proves a run that follows the plan exactly passes and counts as done.
    #[test]
    fn clean_run_passes() {
        let mut ledger = GroupLedger::new("g", 100, FailurePlan::EveryNth(10), 3);
        let dead = run_clean(&mut ledger, 100, 3);
        assert_eq!(dead.len(), 10);
        assert!(ledger.is_done());
        let verdict = ledger.verdict(&dead);
        assert!(verdict.passed, "{verdict:?}");
    }

    // Proves each kind of wrong answer fails the verdict: loss, duplicate, a missing, extra
    // or doubled dead letter, and a wrong attempt number.
    #[test]
    fn every_wrong_answer_fails() {
        let mut lossy = GroupLedger::new("g", 10, FailurePlan::None, 1);
        for seq in 0..9 {
            lossy.delivered(seq, 1);
            lossy.acked(seq);
        }
        assert!(!lossy.is_done());
        assert!(!lossy.verdict(&[]).passed);

        let mut duplicate = GroupLedger::new("g", 2, FailurePlan::None, 1);
        run_clean(&mut duplicate, 2, 1);
        duplicate.delivered(1, 2);
        duplicate.acked(1);
        assert!(!duplicate.verdict(&[]).passed);

        let mut retry = GroupLedger::new("g", 20, FailurePlan::EveryNth(10), 3);
        let dead = run_clean(&mut retry, 20, 3);
        assert!(retry.verdict(&dead).passed);
        assert!(!retry.verdict(&dead[..1]).passed, "missing dead letter");
        assert!(!retry.verdict(&[0, 10, 10]).passed, "doubled dead letter");
        assert!(!retry.verdict(&[0, 10, 11]).passed, "extra dead letter");

        let mut numbering = GroupLedger::new("g", 1, FailurePlan::None, 3);
        numbering.delivered(0, 2);
        numbering.acked(0);
        assert!(!numbering.verdict(&[]).passed);
    }

    // Proves the planned failure count matches what the plan rejects.
    #[test]
    fn failing_count_matches_plan() {
        for count in [0, 1, 9, 10, 11, 1000] {
            let plan = FailurePlan::EveryNth(10);
            let counted = (0..count).filter(|&seq| plan.fails(seq)).count() as u64;
            assert_eq!(plan.failing_count(count), counted);
        }
    }
}
