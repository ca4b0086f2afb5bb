//! The child's lines (see `crashloop/leases.rs` in the store's binaries), parsed into
//! facts about messages, each with the time of the tick it came after.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::model::{Act, Fact};
use super::{Model, GROUPS};

/// The lines of one cycle, parsed.
#[derive(Default)]
pub struct Cycle {
    /// The last tick printed: the time of every call the kill cut short.
    pub kill_ms: u64,
    pub published: BTreeMap<u64, Bytes>,
    /// Per group and offset, the confirmed facts in printed order.
    pub facts: [BTreeMap<u64, Vec<Fact>>; 2],
    /// Per group, the confirmed redrives and purges.
    pub redrives_purges: [(u64, u64); 2],
}

impl Cycle {
    /// Takes one complete line; an error if it does not parse or contradicts the
    /// deliveries seen before.
    pub fn take(&mut self, line: &str, model: &mut Model) -> Result<(), String> {
        let fields: Vec<&str> = line.split(' ').collect();
        let number = |i: usize| -> Result<u64, String> {
            let field = fields.get(i).ok_or(format!("short line {line:?}"))?;
            field.parse().map_err(|_| format!("bad number in {line:?}"))
        };
        let kind = fields[0];
        model.kinds.insert(match (kind, fields.get(5)) {
            ("nack", Some(&outcome)) => format!("nack {} {outcome}", fields[4]),
            _ => kind.to_owned(),
        });
        match kind {
            "tick" if number(1)? > self.kill_ms => {
                self.kill_ms = number(1)?;
                return Ok(());
            }
            "tick" => return Err(format!("the clock went back: {line:?}")),
            "pub" => {
                let payload = Bytes::from(fields.get(2).ok_or("no payload")?.to_string());
                if self.published.insert(number(1)?, payload).is_some() {
                    return Err(format!("offset published twice: {line:?}"));
                }
                return Ok(());
            }
            _ => {}
        }
        let g = GROUPS
            .iter()
            .position(|spec| Some(&spec.name) == fields.get(1))
            .ok_or(format!("unknown group in {line:?}"))?;
        let field = |i: usize| fields.get(i).copied().ok_or(format!("short line {line:?}"));
        let delay = |i: usize| -> Result<Option<u64>, String> {
            match field(i)? {
                "-" => Ok(None),
                ms => ms
                    .parse()
                    .map(Some)
                    .map_err(|_| format!("bad delay in {line:?}")),
            }
        };
        let (at, offset) = if kind == "poll" {
            (3, number(3)?)
        } else {
            (2, number(2)?)
        };
        let attempt = number(at + 1)? as u32;
        let act = match kind {
            "poll" => {
                let consumer = field(2)?.to_owned();
                let known = model.delivered_to[g]
                    .entry((offset, attempt))
                    .or_insert(consumer.clone());
                if *known != consumer {
                    return Err(format!("{line:?}: delivered to {known} before"));
                }
                Act::Deliver
            }
            "touch" => Act::Touch,
            "ack" => Act::Ack,
            "nack" => Act::Nack(delay(4)?, field(5)? == "dead"),
            "release" => Act::Release(delay(4)?),
            "reject" => Act::Reject,
            "refused" => Act::Refused,
            "redrive" => {
                self.redrives_purges[g].0 += 1;
                Act::Redrive
            }
            "purge" => {
                self.redrives_purges[g].1 += 1;
                Act::Purge
            }
            _ => return Err(format!("unknown line {line:?}")),
        };
        let fact = Fact {
            attempt,
            at_ms: self.kill_ms,
            act,
        };
        self.facts[g].entry(offset).or_default().push(fact);
        Ok(())
    }
}
