//! The simulation in CI: a bounded run of seeds, and a check that a seed replays exactly.
//!
//! `MAILROOM_SIM_SEEDS` seeds (default 40) from `MAILROOM_SIM_FROM` (default 1), of
//! `MAILROOM_SIM_STEPS` steps each (default 400); `MAILROOM_SIM_SEED` runs just that seed
//! (the replay a failure prints). Seeds run on every core. `.ci/run` runs 1,500 seeds in
//! release; `scripts/simulate.sh` runs seeds for hours.

fn env(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {value}")),
        Err(_) => default,
    }
}

// Proves the store matches the in-memory model after every step of many seeded runs of
// every operation, with restarts, power cuts (between operations and at an exact change
// inside one), a full disk, failing syncs and writes, slow syncs and bit flips; a failing
// seed is printed with the command that replays it.
#[test]
fn seeded_runs_match_the_model() {
    let steps = env("MAILROOM_SIM_STEPS", 400) as usize;
    let seeds = match std::env::var("MAILROOM_SIM_SEED") {
        Ok(_) => {
            let seed = env("MAILROOM_SIM_SEED", 0);
            seed..=seed
        }
        Err(_) => {
            let from = env("MAILROOM_SIM_FROM", 1);
            from..=from + env("MAILROOM_SIM_SEEDS", 40) - 1
        }
    };
    // Seeds are independent: they run on every core, each seed on one thread as always
    // (a run is a function of its seed alone), and failures are reported in seed order.
    let seeds: Vec<u64> = seeds.collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut failures: Vec<(u64, String)> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads)
            .map(|first| {
                let mine: Vec<u64> = seeds.iter().copied().skip(first).step_by(threads).collect();
                scope.spawn(move || {
                    mine.into_iter()
                        .filter_map(|seed| failure(seed, steps).map(|text| (seed, text)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        runs.into_iter()
            .flat_map(|run| run.join().expect("failures are caught"))
            .collect()
    });
    failures.sort();
    let failures: Vec<String> = failures.into_iter().map(|(_, text)| text).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Runs `seed`; answers its failure, if it fails (a panic included).
fn failure(seed: u64, steps: usize) -> Option<String> {
    match std::panic::catch_unwind(|| mailroom_sim::run(seed, steps)) {
        Ok(Ok(_)) => None,
        Ok(Err(failure)) => Some(failure.to_string()),
        Err(_) => Some(format!(
            "simulation seed {seed} panicked (above); replay: MAILROOM_SIM_SEED={seed} \
             MAILROOM_SIM_STEPS={steps} cargo test -p mailroom-sim --test simulation"
        )),
    }
}

// Proves a run is a function of its seed: two runs of each of a few seeds give the same
// trace (every action, answer, fault and crash image), so a failing seed replays.
#[test]
fn a_seed_replays_exactly() {
    for seed in [7, 1_000_003, u64::MAX] {
        let first = mailroom_sim::run(seed, 200);
        let again = mailroom_sim::run(seed, 200);
        match (first, again) {
            (Ok(first), Ok(again)) => assert_eq!(first, again, "seed {seed}"),
            (Err(first), Err(again)) => {
                assert_eq!(
                    (first.step, first.tail),
                    (again.step, again.tail),
                    "seed {seed}"
                )
            }
            (first, again) => panic!("seed {seed}: {first:?} then {again:?}"),
        }
    }
}

// Proves the server's request handling is in the simulation: a run sends a share of its
// actions through the HTTP handlers and some deliberately malformed requests.
#[test]
fn a_share_of_the_steps_goes_over_http() {
    let report = mailroom_sim::run(7, 400).expect("seed 7 passes");
    let (over_http, malformed) = report.requests;
    assert!(over_http >= 100, "{report:?}");
    assert!(malformed >= 1, "{report:?}");
}
