//! Kill -9 loop: a real child process works on a store on disk and is SIGKILLed at random
//! moments; after each kill the store must hold every operation the child confirmed.
//!
//! The number of cycles is `MAILROOM_CRASHLOOP_CYCLES` (default 100); the seed of the
//! first cycle is `MAILROOM_CRASHLOOP_SEED` (default 1). `scripts/crashloop.sh` runs a
//! long one.

use std::path::Path;
use std::process::Command;

use bytes::Bytes;
use mailroom::topic::{DeadLetter, DeliveryId};
use mailroom_store::log::LogOptions;
use mailroom_store::{Store, StoreOptions};

// The one-thread loop checks its own way and uses only the child runner and the draws.
#[allow(dead_code)]
mod crashloop_support;

use crashloop_support::{env_u64, run_child_until_killed, run_until_killed, Draws};

const GROUPS: [(&str, u32); 2] = [("g0", 2), ("g1", 3)];

/// What the confirmed operations say one group's state is.
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupModel {
    position: u64,
    attempt: u32,
    in_flight: bool,
    max_attempts: u32,
    dead: Vec<(u64, u32)>,
}

impl GroupModel {
    fn new(max_attempts: u32) -> Self {
        GroupModel {
            position: 0,
            attempt: 0,
            in_flight: false,
            max_attempts,
            dead: Vec::new(),
        }
    }

    fn current(&self) -> DeliveryId {
        DeliveryId {
            offset: self.position,
            attempt: self.attempt,
        }
    }

    /// Applies a confirmed line about this group; panics if it does not follow.
    fn confirm(&mut self, kind: &str, id: DeliveryId, outcome: Option<&str>, len: u64) {
        match kind {
            "D" if self.in_flight => {
                assert_eq!(id, self.current(), "poll changed the in-flight delivery")
            }
            "D" => {
                assert!(self.position < len, "delivered past the end");
                assert_eq!(
                    id,
                    DeliveryId {
                        offset: self.position,
                        attempt: self.attempt + 1
                    }
                );
                self.attempt += 1;
                self.in_flight = true;
            }
            _ => {
                assert!(
                    self.in_flight && id == self.current(),
                    "{kind} of {id:?} not owned"
                );
                let dead = kind == "N" && outcome == Some("X");
                if kind == "N" {
                    assert_eq!(dead, id.attempt == self.max_attempts, "wrong nack outcome");
                }
                if dead {
                    self.dead.push((id.offset, id.attempt));
                }
                if kind == "N" && !dead {
                    self.in_flight = false;
                } else {
                    self.position += 1;
                    self.attempt = 0;
                    self.in_flight = false;
                }
            }
        }
    }

    /// The states one unconfirmed operation could have led to from here.
    fn successors(&self, len: u64) -> Vec<GroupModel> {
        let finished = |dead: bool| {
            let mut next = self.clone();
            if dead {
                next.dead.push((self.position, self.attempt));
            }
            next.position += 1;
            next.attempt = 0;
            next.in_flight = false;
            next
        };
        let mut next = Vec::new();
        if self.in_flight {
            next.push(finished(false));
            if self.attempt < self.max_attempts {
                let mut retried = self.clone();
                retried.in_flight = false;
                next.push(retried);
            } else {
                next.push(finished(true));
            }
        } else if self.position < len {
            let mut delivered = self.clone();
            delivered.attempt += 1;
            delivered.in_flight = true;
            next.push(delivered);
        }
        next
    }
}

struct Model {
    messages: Vec<Bytes>,
    groups: Vec<GroupModel>,
}

fn options() -> StoreOptions {
    // The same as the child's: the options are not part of the on-disk format, but
    // the checks should see the store as the child did.
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 4 << 10,
            index_interval_bytes: 512,
            ..LogOptions::default()
        },
        checkpoint_every: 16,
        ..StoreOptions::default()
    }
}

/// Runs the child until it has confirmed `lines_before_kill` operations, SIGKILLs it,
/// and applies everything it confirmed to the model.
fn run_child(dir: &Path, seed: u64, lines_before_kill: u64, model: &mut Model) {
    let args = [dir.display().to_string(), seed.to_string()];
    let result = run_child_until_killed(&args, lines_before_kill, |line| {
        apply_line(line, model);
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
}

fn apply_line(line: &str, model: &mut Model) {
    let fields: Vec<&str> = line.split(' ').collect();
    let number = |i: usize| fields[i].parse::<u64>().expect("a number");
    if fields[0] == "P" {
        let offset = number(1);
        assert_eq!(
            offset,
            model.messages.len() as u64,
            "publish offsets have a gap"
        );
        model.messages.push(Bytes::from(fields[2].to_owned()));
        return;
    }
    let g = GROUPS
        .iter()
        .position(|(name, _)| *name == fields[1])
        .expect("a group");
    let id = DeliveryId {
        offset: number(2),
        attempt: number(3) as u32,
    };
    let len = model.messages.len() as u64;
    model.groups[g].confirm(fields[0], id, fields.get(4).copied(), len);
}

/// Opens the store as it was left and checks it against the model. The last operation
/// the child started may have landed without being confirmed: that one is adopted.
fn check(dir: &Path, model: &mut Model) {
    let store = Store::open(dir, options()).expect("reopen after kill -9");
    let topic = store.topic("t").expect("the topic survives");
    let confirmed = model.messages.len() as u64;
    let len = topic.len();
    assert!(
        len == confirmed || len == confirmed + 1,
        "log has {len}, {confirmed} confirmed"
    );
    if len > confirmed {
        model.messages.push(
            topic
                .read(confirmed)
                .unwrap()
                .expect("unconfirmed tail readable"),
        );
    }
    for (offset, expected) in model.messages.iter().enumerate() {
        let found = topic.read(offset as u64).unwrap();
        assert_eq!(found.as_ref(), Some(expected), "message {offset}");
    }
    for (g, (name, _)) in GROUPS.iter().enumerate() {
        let info = topic.group_info(name).expect("the group survives");
        let actual = GroupModel {
            position: info.position,
            attempt: info.attempt,
            in_flight: info.in_flight.is_some(),
            max_attempts: info.max_attempts,
            dead: topic
                .dead_letters(name)
                .unwrap()
                .iter()
                .map(|dead| (dead.offset, dead.attempts))
                .collect(),
        };
        let expected = &model.groups[g];
        let ok = actual == *expected || expected.successors(len).contains(&actual);
        assert!(
            ok,
            "group {name}: store has {actual:?}, confirmed {expected:?}"
        );
        for DeadLetter {
            offset, message, ..
        } in topic.dead_letters(name).unwrap()
        {
            assert_eq!(
                message, model.messages[offset as usize],
                "dead letter payload"
            );
        }
        model.groups[g] = actual;
    }
}

// Proves that after SIGKILL at random moments every confirmed publish is readable with its
// bytes at gap-free offsets, and group positions, attempts, in-flight deliveries and dead
// letters are what the child was told (plus at most its one unconfirmed operation).
#[test]
fn kill_minus_nine_loses_nothing_confirmed() {
    let cycles = env_u64("MAILROOM_CRASHLOOP_CYCLES", 100);
    let first_seed = env_u64("MAILROOM_CRASHLOOP_SEED", 1);
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model {
        messages: Vec::new(),
        groups: GROUPS
            .iter()
            .map(|(_, max)| GroupModel::new(*max))
            .collect(),
    };
    let mut draws = Draws::new(first_seed);
    for cycle in 0..cycles {
        let lines_before_kill = 1 + draws.next_draw() % 40;
        let seed = first_seed + cycle;
        run_child(dir.path(), seed, lines_before_kill, &mut model);
        check(dir.path(), &mut model);
    }
    assert!(!model.messages.is_empty());
}

/// A shell running `script`, for the runner's own tests.
fn shell(script: &str) -> Command {
    let mut command = Command::new("sh");
    command.args(["-c", script]);
    command
}

// Proves the runner fails a cycle whose child exited by itself (status 2, as the child
// does when it finds a fault) just before the kill, and shows the child's stderr: the
// child exits at once, and a line printed later by a process it left behind triggers a
// kill that finds it already dead.
#[test]
fn a_child_that_exits_before_the_kill_fails_the_cycle() {
    let child = shell("(sleep 0.3; echo late) & echo 'fault found' >&2; exit 2");
    let error = run_until_killed(child, 1, |_| Ok(())).expect_err("the child was not killed");
    assert!(error.contains("exit status: 2"), "{error}");
    assert!(error.contains("fault found"), "{error}");
}

// Proves the runner accepts a child that the SIGKILL killed.
#[test]
fn a_child_killed_by_the_runner_passes() {
    let child = shell("echo ready; exec sleep 30");
    run_until_killed(child, 1, |_| Ok(())).unwrap();
}
