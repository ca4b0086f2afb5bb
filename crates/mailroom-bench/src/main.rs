//! `mailroom-bench`: runs one workload against one broker and appends its result as a JSON
//! line (`run`), or turns collected lines into the markdown table (`table`).
//!
//! `bench/peers.sh` starts the brokers and calls `run` for every workload and system;
//! `bench/smoke.sh` does the same with tiny counts.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Parser as _;

use mailroom_bench::ledger::Verdict;
use mailroom_bench::payload::{HEADER_BYTES, PAYLOAD_BYTES_MAX};
use mailroom_bench::report::{Latency, RunReport};
use mailroom_bench::workload::Measured;

mod cli;

/// The same allocator as the server's (`mailroom-allocator`), for every system's client
/// alike: the clients allocate per request (header maps, futures, JSON), and under
/// glibc's allocator that was about a tenth of the bench client's instructions per
/// unbatched publish (BENCHMARKS.md, "Requests' URIs put together directly, the bench
/// client on mimalloc").
#[global_allocator]
static ALLOCATOR: mailroom_allocator::Allocator = mailroom_allocator::Allocator;

use cli::args::{Cli, Command, RunArgs};
use cli::dispatch::measure;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Table { input } => match table(&input) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("error: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Run(args) => run_command(&args),
    }
}

fn table(input: &PathBuf) -> Result<()> {
    let text =
        std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let runs = text
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(serde_json::from_str)
        .collect::<Result<Vec<RunReport>, _>>()
        .context("parsing results")?;
    print!("{}", mailroom_bench::table::render(&runs));
    Ok(())
}

/// Exit codes: 0 passed, 1 the run could not be carried out, 2 its correctness check failed.
fn run_command(args: &RunArgs) -> ExitCode {
    if !(HEADER_BYTES..=PAYLOAD_BYTES_MAX).contains(&args.payload_bytes) {
        eprintln!("error: --payload-bytes must be in {HEADER_BYTES}..={PAYLOAD_BYTES_MAX}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(measure(args));
    let errored = outcome.is_err();
    let report = build_report(args, outcome);
    summarise(&report);
    if let Err(error) = append(args.out.as_ref(), &report) {
        eprintln!("error: writing the result: {error:#}");
        return ExitCode::FAILURE;
    }
    // Dropping the runtime with clients' background tasks still alive must not hang.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match (errored, report.passed()) {
        (true, _) => ExitCode::FAILURE,
        (false, true) => ExitCode::SUCCESS,
        (false, false) => ExitCode::from(2),
    }
}

fn build_report(args: &RunArgs, outcome: Result<Measured>) -> RunReport {
    let mut report = RunReport {
        workload: format!("{:?}", args.workload).to_lowercase(),
        variant: args.variant(),
        system: args
            .label
            .clone()
            .unwrap_or_else(|| format!("{:?}", args.system).to_lowercase()),
        durability: args.durability.clone(),
        durability_detail: args.durability_detail.clone(),
        latency_kind: args.latency_kind().to_owned(),
        ..RunReport::default()
    };
    match outcome {
        Err(error) => {
            report.verdict = Verdict::from_problems(vec![format!("run failed: {error:#}")]);
        }
        Ok(measured) => {
            let seconds = measured.elapsed.as_secs_f64();
            report.messages = measured.messages;
            report.seconds = seconds;
            report.msgs_per_s = measured.messages as f64 / seconds.max(1e-9);
            report.latency = Latency::of(&measured.latency);
            report.verdict = measured.verdict;
            report.subscribers = measured.subscribers;
            report.notes = measured.notes;
            if let Some(usage) = measured.usage {
                // A probe of the database alone (PgQ, SKIP LOCKED: no broker process).
                if !args.broker_pid.is_empty() {
                    report.broker_cpu_s = Some(usage.cpu_seconds);
                    report.broker_peak_rss_bytes = Some(usage.peak_rss_bytes);
                    report.peak_rss_per_run = usage.peak_is_per_run;
                }
                report.database = usage.database;
            }
        }
    }
    report
}

fn summarise(report: &RunReport) {
    let verdict = if report.passed() {
        "ok".to_owned()
    } else {
        format!("FAIL {:?}", report.verdict.problems)
    };
    // The broker's usage is unknown for a peer whose pid was not given: a dash, not `None`.
    let cpu = report
        .broker_cpu_s
        .map_or_else(|| "–".to_owned(), |s| format!("{s:.1} s"));
    let rss = report
        .broker_peak_rss_bytes
        .map_or_else(|| "–".to_owned(), |b| format!("{b} B"));
    eprintln!(
        "{} / {} / {} / {}: {} msgs in {:.2} s = {:.0} msgs/s, p50 {} µs p99 {} µs p99.9 {} µs, cpu {cpu}, rss {rss} — {verdict}",
        report.workload,
        report.variant,
        report.durability,
        report.system,
        report.messages,
        report.seconds,
        report.msgs_per_s,
        report.latency.p50_us,
        report.latency.p99_us,
        report.latency.p999_us,
    );
}

fn append(out: Option<&PathBuf>, report: &RunReport) -> Result<()> {
    let line = serde_json::to_string(report)?;
    match out {
        Some(path) => {
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)?;
            writeln!(file, "{line}")?;
        }
        None => println!("{line}"),
    }
    Ok(())
}
