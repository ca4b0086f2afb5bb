//! `mailroom-sim`: runs simulation seeds (see the library's docs).
//!
//! ```text
//! mailroom-sim --seed 42 [--steps 400]               one seed, its trace hash
//! mailroom-sim --from 1 --seeds 1000 [--steps 400]   seeds 1..=1000
//! mailroom-sim --from 1 --minutes 60 [--steps 400]   seeds from 1 on, for an hour
//! ```
//!
//! Exits 1 after printing each failing seed (the run goes on to the next), 2 on bad usage.

use std::process::ExitCode;
use std::time::{Duration, Instant};

struct Args {
    from: u64,
    seeds: Option<u64>,
    minutes: Option<u64>,
    steps: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        from: 1,
        seeds: None,
        minutes: None,
        steps: 400,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let number: u64 = value
            .parse()
            .map_err(|_| format!("{flag}: not a number: {value}"))?;
        match flag.as_str() {
            "--seed" => {
                args.from = number;
                args.seeds = Some(1);
            }
            "--from" => args.from = number,
            "--seeds" => args.seeds = Some(number),
            "--minutes" => args.minutes = Some(number),
            "--steps" => args.steps = number as usize,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("mailroom-sim: {error}\nusage: mailroom-sim [--seed N | --from N (--seeds N | --minutes N)] [--steps N]");
            return ExitCode::from(2);
        }
    };
    let deadline = args
        .minutes
        .map(|minutes| Instant::now() + Duration::from_secs(minutes * 60));
    let (mut passed, mut failed) = (0u64, 0u64);
    for seed in args.from.. {
        if args.seeds.is_some_and(|seeds| seed - args.from >= seeds)
            || deadline.is_some_and(|deadline| Instant::now() >= deadline)
        {
            break;
        }
        match std::panic::catch_unwind(|| mailroom_sim::run(seed, args.steps)) {
            Ok(Ok(report)) => {
                passed += 1;
                if args.seeds == Some(1) {
                    println!(
                        "seed {seed}: ok, trace {:016x}, faults {:?}, over HTTP {}, malformed {}",
                        report.trace_hash, report.faults, report.requests.0, report.requests.1
                    );
                }
            }
            Ok(Err(failure)) => {
                failed += 1;
                println!("{failure}");
            }
            Err(_) => {
                failed += 1;
                println!("simulation seed {seed} panicked (above); replay: mailroom-sim --seed {seed} --steps {}", args.steps);
            }
        }
        if (passed + failed) % 100 == 0 {
            eprintln!("mailroom-sim: {passed} seeds passed, {failed} failed");
        }
    }
    println!("mailroom-sim: {passed} seeds passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
