//! The record of a run: one line per step and fault, hashed so two runs of one seed can be
//! compared, the tail kept for a failure's report.

use std::collections::VecDeque;

/// How many lines a trace keeps for reports (the hash covers them all).
const TAIL_LINES: usize = 200;

/// A run's trace: an FNV-1a hash over every line, and the last lines.
#[derive(Debug)]
pub struct Trace {
    hash: u64,
    tail: VecDeque<String>,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            hash: 0xcbf2_9ce4_8422_2325,
            tail: VecDeque::new(),
        }
    }
}

impl Trace {
    /// Adds a line.
    pub fn push(&mut self, line: String) {
        for byte in line.bytes().chain([b'\n']) {
            self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        if self.tail.len() == TAIL_LINES {
            self.tail.pop_front();
        }
        self.tail.push_back(line);
    }

    /// The hash of every line so far.
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The last `count` lines (at most the kept ones).
    pub fn tail(&self, count: usize) -> Vec<String> {
        let skip = self.tail.len().saturating_sub(count);
        self.tail.iter().skip(skip).cloned().collect()
    }
}
