//! One simulated run: the store on a [`Disk`], the clock, the model, the faults, and the
//! comparison after every step.

use std::path::Path;
use std::sync::Arc;

use mailroom::clock::{Clock, ManualClock};
use mailroom_store::log::{LogOptions, SyncPolicy};
use mailroom_store::storage::SimStorage;
use mailroom_store::{Retention, Store, StoreOptions};

use crate::action::{draw, Action, Seen, TOPICS};
use crate::candidates::Candidates;
use crate::compare::{Starts, StoreViews};
use crate::disk::{files_under, Disk};
use crate::fault::{check_typed, draw_fault, fault_index, kind, Fault};
use crate::http_side::{self, Server};
use crate::model::Outcome;
use crate::rng::Rng;
use crate::store_side;
use crate::trace::Trace;

/// Where the simulated store lives on its disk.
const STORE_DIR: &str = "/store";
/// The share of steps (per mille) whose action goes through the server's HTTP handlers
/// rather than the store's API, where it has a route.
const HTTP_PER_MILLE: u64 = 500;
/// The share of fault-free steps (per mille) that send a deliberately malformed request.
const MALFORMED_PER_MILLE: u64 = 20;

/// The outcome of a passing run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The run's seed.
    pub seed: u64,
    /// Steps run.
    pub steps: usize,
    /// A hash of the whole trace: two runs of one seed must give the same.
    pub trace_hash: u64,
    /// How many faults of each kind were injected, as `(name, count)`.
    pub faults: Vec<(&'static str, u64)>,
    /// How many actions went through the server's HTTP handlers, and how many
    /// deliberately malformed requests were refused.
    pub requests: (u64, u64),
}

/// A failing run: where and why, and the last steps before it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The run's seed: `MAILROOM_SIM_SEED=<seed>` replays it.
    pub seed: u64,
    /// The steps the run was to take (a replay takes as many).
    pub steps: usize,
    /// The step that failed.
    pub step: usize,
    /// What did not hold.
    pub message: String,
    /// The trace's last lines.
    pub tail: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "simulation seed {} failed at step {}:",
            self.seed, self.step
        )?;
        writeln!(f, "  {}", self.message)?;
        writeln!(f, "last steps:")?;
        for line in &self.tail {
            writeln!(f, "  {line}")?;
        }
        write!(
            f,
            "replay: MAILROOM_SIM_SEED={seed} MAILROOM_SIM_STEPS={steps} cargo test -p mailroom-sim --release --test simulation -- --nocapture\n\
             or:     cargo run -p mailroom-sim --release -- --seed {seed} --steps {steps}",
            seed = self.seed,
            steps = self.steps,
        )
    }
}

struct World {
    seed: u64,
    rng: Rng,
    clock: Arc<ManualClock>,
    disk: Disk,
    options: StoreOptions,
    store: Option<Store>,
    /// The server's router over `store` (dropped and rebuilt with it).
    server: Option<Server>,
    candidates: Candidates,
    seen: Seen,
    /// Per topic, where its log started at the last comparison (retention only moves it on).
    starts: Starts,
    trace: Trace,
    /// Counts per fault kind, then flips refused at open, flips that opened.
    faults: [u64; 10],
    /// Actions sent over HTTP, malformed requests sent.
    requests: (u64, u64),
    step: usize,
}

type Check = Result<(), String>;

/// Runs `steps` steps of the workload and faults drawn from `seed`.
///
/// # Errors
///
/// The first check that did not hold, with the seed.
///
/// # Example
///
/// ```
/// let first = mailroom_sim::run(3, 40).unwrap();
/// let again = mailroom_sim::run(3, 40).unwrap();
/// assert_eq!(first.trace_hash, again.trace_hash);
/// ```
pub fn run(seed: u64, steps: usize) -> Result<Report, Failure> {
    let mut world = World::new(seed);
    let result = (0..steps).try_for_each(|step| {
        world.step = step;
        world.run_step()
    });
    world.close();
    match result {
        Ok(()) => Ok(world.report(steps)),
        Err(message) => Err(Failure {
            seed,
            steps,
            step: world.step,
            message,
            tail: world.trace.tail(200),
        }),
    }
}

fn options(rng: &mut Rng, clock: Arc<ManualClock>) -> StoreOptions {
    let mut limit = |per_mille, max| rng.chance(per_mille).then(|| rng.below(max));
    StoreOptions {
        log: LogOptions {
            segment_bytes_max: 256,
            index_interval_bytes: 64,
            sync: SyncPolicy::Always,
            // Zeros ahead of the records from 64 bytes on, so power cuts land among them
            // (the default waits for 64 KiB, which these small segments never hold).
            preallocate_bytes: 64,
            ..LogOptions::default()
        },
        retention: Retention {
            messages_max: limit(500, 20),
            bytes_max: limit(300, 2048),
            age_ms_max: limit(300, 500),
            keep_unconsumed: true,
        },
        checkpoint_every: 1 + rng.below(12),
        clock,
        ..StoreOptions::default()
    }
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = Rng::new(seed);
        let clock = Arc::new(ManualClock::new(1_000));
        let options = options(&mut rng, clock.clone());
        let mut trace = Trace::default();
        trace.push(format!("seed {seed} options {options:?}"));
        World {
            seed,
            rng,
            clock,
            disk: Disk::new(SimStorage::new()),
            options,
            store: None,
            server: None,
            candidates: Candidates::default(),
            seen: Seen::default(),
            starts: [0; TOPICS.len()],
            trace,
            faults: [0; 10],
            requests: (0, 0),
            step: 0,
        }
    }

    fn report(&self, steps: usize) -> Report {
        let names = [
            "restart",
            "crash",
            "cut during",
            "full",
            "sync fails",
            "write fails",
            "slow syncs",
            "flip",
            "flip refused at open",
            "flip opened",
        ];
        Report {
            seed: self.seed,
            steps,
            trace_hash: self.trace.hash(),
            faults: names.into_iter().zip(self.faults).collect(),
            requests: self.requests,
        }
    }

    fn open(&mut self) -> Check {
        let storage = Arc::new(self.disk.clone());
        match Store::open_with(storage, Path::new(STORE_DIR), self.options.clone()) {
            Ok(store) => {
                self.server = Some(Server::new(&store));
                self.store = Some(store);
                Ok(())
            }
            Err(error) => Err(format!("the store did not reopen: {error}")),
        }
    }

    /// Drops the server and the store (the server holds a handle of the store).
    fn close(&mut self) {
        self.server = None;
        self.store = None;
    }

    fn store(&mut self) -> Result<&Store, String> {
        if self.store.is_none() {
            self.open()?;
        }
        Ok(self.store.as_ref().expect("opened above"))
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn run_step(&mut self) -> Check {
        let fault = draw_fault(&mut self.rng);
        if let Some(fault) = fault {
            self.faults[fault_index(fault)] += 1;
        }
        match fault {
            Some(Fault::Restart) => return self.restart(),
            Some(Fault::Crash) => return self.crash(),
            Some(Fault::Flip) => return self.flip(),
            _ => {}
        }
        self.store()?;
        if fault.is_none() && self.rng.chance(MALFORMED_PER_MILLE) {
            return self.malformed();
        }
        let starts = self.starts;
        let action = draw(&mut self.rng, &self.seen, |t| starts[t] == 0);
        let injected = fault.is_some_and(|f| !matches!(f, Fault::SlowSyncs(_)));
        let before = injected.then(|| self.candidates.histories());
        let over_http = self.rng.chance(HTTP_PER_MILLE);
        self.arm(fault);
        let now = self.now();
        let sent = over_http
            .then(|| {
                self.server
                    .as_ref()
                    .and_then(|server| server.apply(&action))
            })
            .flatten();
        let wire = sent.is_some();
        self.requests.0 += u64::from(wire);
        let got = match sent {
            Some(got) => got,
            None => store_side::apply(self.store()?, now, &action),
        };
        self.disarm();
        if let Action::Advance(ms) = action {
            self.clock.advance_ms(ms);
        }
        self.clock.advance_ms(self.disk.take_elapsed_ms());
        let via = if wire { " (HTTP)" } else { "" };
        self.trace.push(format!(
            "#{} {fault:?} {action:?}{via} => {got:?}",
            self.step
        ));
        match (&got, before) {
            (Outcome::Answer(_), _) => {
                let handed = self.candidates.answered(now, &action, &got, wire)?;
                if let (Some(ids), Some(key)) = (handed, handed_key(&action)) {
                    self.seen.handed(key, ids);
                }
            }
            (Outcome::Fault(error), Some(before)) => {
                check_typed(fault, error)?;
                self.candidates.failed(before, now, &action);
            }
            (Outcome::Fault(error), None) => {
                let expected =
                    self.candidates
                        .answered(now, &action, &Outcome::Fault(String::new()), wire);
                return Err(format!(
                    "{action:?} failed unprovoked: {error} ({expected:?})"
                ));
            }
        }
        match fault {
            Some(Fault::CutDuring(_)) => self.crash(),
            Some(Fault::Full | Fault::SyncFails | Fault::WriteFails) => {
                // Confirmed state must be intact while the store is stopped (reads may
                // fail, never differ)...
                let views = StoreViews::read(self.store()?);
                self.candidates
                    .check_lenient(&views, self.now(), &self.starts)
                    .map_err(|e| format!("stopped by {fault:?}: {e}"))?;
                // ...and after a restart (today's way back from a fail-stop).
                self.restart()
            }
            _ => self.compare(),
        }
    }

    fn arm(&self, fault: Option<Fault>) {
        match fault {
            Some(Fault::CutDuring(changes)) => self.disk.cut_power_after(changes),
            Some(Fault::Full) => self.disk.sim().set_full(true),
            Some(Fault::SyncFails) => self.disk.sim().fail_next_syncs(1),
            Some(Fault::WriteFails) => self.disk.sim().fail_next_writes(1),
            Some(Fault::SlowSyncs(ms)) => self.disk.set_sync_ms(ms),
            _ => {}
        }
    }

    fn disarm(&self) {
        self.disk.disarm();
        self.disk.set_sync_ms(0);
        self.disk.sim().set_full(false);
        self.disk.sim().fail_next_syncs(0);
        self.disk.sim().fail_next_writes(0);
    }

    /// Drops the store and reopens the same files; then compares.
    fn restart(&mut self) -> Check {
        self.close();
        self.trace.push(format!("#{} restart", self.step));
        self.open()?;
        self.compare()
    }

    /// Drops the store, keeps what a power cut now could leave, reopens, compares.
    fn crash(&mut self) -> Check {
        self.close();
        let image_seed = self.rng.next_u64();
        self.disk = Disk::new(self.disk.sim().crash(image_seed));
        self.trace
            .push(format!("#{} power cut, image {image_seed}", self.step));
        self.open()?;
        self.compare()
    }

    /// Flips one bit of one durable file in a copy of the disk; the copy must refuse to
    /// open, or report the damage where it reads it, or read exactly what the model says.
    fn flip(&mut self) -> Check {
        self.store()?;
        self.close();
        // Everything durable, nothing pending: the copy below is exact.
        let image_seed = self.rng.next_u64();
        self.disk = Disk::new(self.disk.sim().crash(image_seed));
        let damaged = self.disk.sim().crash(0);
        let files = files_under(&damaged, Path::new(STORE_DIR)).map_err(|e| e.to_string())?;
        let files: Vec<_> = files
            .into_iter()
            .filter(|f| damaged.file_bytes(f).is_some_and(|b| !b.is_empty()))
            .collect();
        if !files.is_empty() {
            let file = &files[self.rng.index(files.len())];
            let len = damaged.file_bytes(file).map_or(1, |b| b.len());
            let (byte, bit) = (self.rng.index(len), self.rng.below(8));
            damaged.corrupt_file(file, |b| b[byte] ^= 1 << bit);
            let opened = Store::open_with(
                Arc::new(damaged),
                Path::new(STORE_DIR),
                self.options.clone(),
            );
            let line = format!(
                "#{} flip {} byte {byte} bit {bit}",
                self.step,
                file.display()
            );
            match opened {
                Err(error) => {
                    self.faults[8] += 1;
                    let refused = format!("{line}: refused ({})", kind(&error));
                    self.trace.push(refused);
                }
                Ok(store) => {
                    self.faults[9] += 1;
                    self.trace.push(format!("{line}: opened"));
                    let views = StoreViews::read(&store);
                    self.candidates
                        .check_lenient(&views, self.now(), &self.starts)
                        .map_err(|e| format!("after {line}: {e}"))?;
                }
            }
        }
        self.open()?;
        self.compare()
    }

    /// Sends one of the deliberately malformed requests: it must be refused with its
    /// status and code, and change nothing (the comparison after it says so).
    fn malformed(&mut self) -> Check {
        let n = self.rng.index(http_side::MALFORMED.len());
        let server = self
            .server
            .as_ref()
            .ok_or("no server over the open store")?;
        let line = server.malformed(n)?;
        self.requests.1 += 1;
        self.trace.push(format!("#{} malformed {line}", self.step));
        self.compare()
    }

    /// Compares the store with the candidate models, keeping those that match.
    fn compare(&mut self) -> Check {
        let views = StoreViews::read(self.store()?);
        let now = self.now();
        let count = self.candidates.len();
        self.starts = self.candidates.compare(&views, now, &self.starts)?;
        if self.candidates.len() != count {
            self.trace.push(format!(
                "#{} {} of {count} outcomes left",
                self.step,
                self.candidates.len()
            ));
        }
        Ok(())
    }
}

/// Which (topic, group, consumer) an action's deliveries were handed to.
fn handed_key(action: &Action) -> Option<(usize, usize, usize)> {
    match *action {
        Action::Poll(t, g, c) | Action::PollBatch(t, g, c, _) => Some((t, g, c)),
        Action::AckThenPoll(t, g, _, c, _) => Some((t, g, c)),
        _ => None,
    }
}
