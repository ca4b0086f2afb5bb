//! The markdown table built from the runs' JSON lines, with the ratio mailroom / peer.
//!
//! Rows are grouped by workload, variant and durability row; within a group mailroom comes
//! first and every peer row carries two ratios: throughput (mailroom msgs/s ÷ peer msgs/s,
//! above 1 means mailroom is faster) and p99 latency (mailroom p99 ÷ peer p99, below 1 means
//! mailroom is faster). A run whose correctness check failed shows `FAIL` instead of
//! figures, and its problems are listed under the table: a fast wrong answer is no figure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::RunReport;

const SYSTEM_ORDER: [&str; 7] = [
    "mailroom",
    "redis",
    "nats",
    "rabbitmq",
    "disk",
    "pgq",
    "skiplocked",
];

fn system_rank(system: &str) -> usize {
    SYSTEM_ORDER
        .iter()
        .position(|&s| s == system)
        .unwrap_or(SYSTEM_ORDER.len())
}

fn workload_rank(workload: &str) -> usize {
    ["publish", "consume", "retry", "fanout", "parallel", "live"]
        .iter()
        .position(|&w| w == workload)
        .unwrap_or(9)
}

/// Renders the runs as markdown: the main table, live fan-out per-subscriber detail,
/// notes, and every failed check.
///
/// ```
/// use mailroom_bench::report::RunReport;
/// use mailroom_bench::ledger::Verdict;
/// let mut mailroom = RunReport { workload: "publish".into(), variant: "100 B".into(), system: "mailroom".into(), durability: "strict".into(), msgs_per_s: 200.0, verdict: Verdict::from_problems(vec![]), ..RunReport::default() };
/// let mut redis = RunReport { system: "redis".into(), msgs_per_s: 100.0, ..mailroom.clone() };
/// let table = mailroom_bench::table::render(&[mailroom, redis]);
/// assert!(table.contains("| 2.00 |"));
/// ```
pub fn render(runs: &[RunReport]) -> String {
    let runs = &medians(runs);
    let mut groups: BTreeMap<(usize, String, String), Vec<&RunReport>> = BTreeMap::new();
    for run in runs {
        groups
            .entry((
                workload_rank(&run.workload),
                run.variant.clone(),
                run.durability.clone(),
            ))
            .or_default()
            .push(run);
    }
    let mut out = String::new();
    out.push_str("| workload | variant | durability | system | msgs/s | p50 µs | p99 µs | p99.9 µs | broker CPU s | broker peak RSS MiB | mailroom/peer msgs/s | mailroom/peer p99 | check |\n");
    out.push_str("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for ((_, variant, durability), mut rows) in groups {
        rows.sort_by_key(|run| system_rank(&run.system));
        let mailroom = rows
            .iter()
            .find(|run| run.system == "mailroom" && run.passed());
        for run in &rows {
            row(&mut out, run, &variant, &durability, mailroom.copied());
        }
    }
    live_detail(&mut out, runs);
    database_detail(&mut out, runs);
    notes(&mut out, runs);
    out
}

/// One run per (workload, variant, durability, system) where rounds repeated it: the
/// passing run with the median rate (the lower middle of an even count), with a note of
/// every round's rate; failed runs are all kept, so each shows as FAIL.
fn medians(runs: &[RunReport]) -> Vec<RunReport> {
    let mut keyed: BTreeMap<(String, String, String, String), Vec<&RunReport>> = BTreeMap::new();
    let mut order = Vec::new();
    for run in runs {
        let key = (
            run.workload.clone(),
            run.variant.clone(),
            run.durability.clone(),
            run.system.clone(),
        );
        if !keyed.contains_key(&key) {
            order.push(key.clone());
        }
        keyed.entry(key).or_default().push(run);
    }
    let mut out = Vec::new();
    for key in order {
        let rounds = &keyed[&key];
        out.extend(
            rounds
                .iter()
                .filter(|run| !run.passed())
                .map(|run| (*run).clone()),
        );
        let mut passed: Vec<&RunReport> =
            rounds.iter().copied().filter(|run| run.passed()).collect();
        if passed.is_empty() {
            continue;
        }
        let rates: Vec<String> = passed
            .iter()
            .map(|run| format!("{:.0}", run.msgs_per_s))
            .collect();
        passed.sort_by(|a, b| a.msgs_per_s.total_cmp(&b.msgs_per_s));
        let mut median = passed[(passed.len() - 1) / 2].clone();
        if passed.len() > 1 {
            median.notes.push(format!(
                "median of {} rounds, msgs/s in round order: {}",
                passed.len(),
                rates.join(", ")
            ));
        }
        out.push(median);
    }
    out
}

/// Where a PostgreSQL-backed run's time went, per finished message: the database's CPU,
/// its WAL flushes and writes, commits and statements, beside the broker's CPU.
fn database_detail(out: &mut String, runs: &[RunReport]) {
    let probed: Vec<_> = runs
        .iter()
        .filter_map(|run| run.database.map(|db| (run, db)))
        .filter(|(run, _)| run.passed() && run.messages > 0)
        .collect();
    if probed.is_empty() {
        return;
    }
    out.push_str("\n### Where the time goes: the database, per message\n\n");
    out.push_str("| workload | variant | durability | system | msgs/s | database CPU µs/msg | broker CPU µs/msg | WAL flushes/msg | WAL writes/msg | WAL bytes/msg | commits/msg | statements/msg |\n");
    out.push_str("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut probed = probed;
    probed.sort_by_key(|(run, _)| {
        (
            workload_rank(&run.workload),
            run.variant.clone(),
            run.durability.clone(),
            system_rank(&run.system),
        )
    });
    for (run, db) in probed {
        let per = |value: f64| value / run.messages as f64;
        let broker = run
            .broker_cpu_s
            .map_or("–".to_owned(), |s| format!("{:.0}", per(s * 1e6)));
        let statements = db
            .statements
            .map_or("–".to_owned(), |n| format!("{:.2}", per(n as f64)));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.0} | {:.0} | {broker} | {:.3} | {:.3} | {:.0} | {:.3} | {statements} |",
            run.workload,
            run.variant,
            run.durability,
            run.system,
            run.msgs_per_s,
            per(db.cpu_seconds * 1e6),
            per(db.wal_syncs as f64),
            per(db.wal_writes as f64),
            per(db.wal_bytes as f64),
            per(db.commits as f64),
        );
    }
}

fn row(
    out: &mut String,
    run: &RunReport,
    variant: &str,
    durability: &str,
    mailroom: Option<&RunReport>,
) {
    let durability = if run.durability_detail.is_empty() {
        durability.to_owned()
    } else {
        format!("{durability}: {}", run.durability_detail)
    };
    let cpu = run
        .broker_cpu_s
        .map_or("–".to_owned(), |s| format!("{s:.1}"));
    let rss = run.broker_peak_rss_bytes.map_or("–".to_owned(), |b| {
        let mib = b as f64 / (1024.0 * 1024.0);
        if run.peak_rss_per_run {
            format!("{mib:.0}")
        } else {
            format!("{mib:.0}*")
        }
    });
    if !run.passed() {
        let _ = writeln!(out, "| {} | {variant} | {durability} | {} | FAIL | – | – | – | {cpu} | {rss} | – | – | FAIL |", run.workload, run.system);
        return;
    }
    let (throughput_ratio, p99_ratio) = match mailroom {
        Some(m) if run.system != "mailroom" => (
            ratio(m.msgs_per_s, run.msgs_per_s),
            ratio(m.latency.p99_us as f64, run.latency.p99_us as f64),
        ),
        _ => ("–".to_owned(), "–".to_owned()),
    };
    let _ = writeln!(
        out,
        "| {} | {variant} | {durability} | {} | {:.0} | {} | {} | {} | {cpu} | {rss} | {throughput_ratio} | {p99_ratio} | ok |",
        run.workload, run.system, run.msgs_per_s, run.latency.p50_us, run.latency.p99_us, run.latency.p999_us,
    );
}

fn ratio(ours: f64, theirs: f64) -> String {
    if theirs > 0.0 {
        format!("{:.2}", ours / theirs)
    } else {
        "–".to_owned()
    }
}

fn live_detail(out: &mut String, runs: &[RunReport]) {
    let live: Vec<_> = runs
        .iter()
        .filter(|run| !run.subscribers.is_empty())
        .collect();
    if live.is_empty() {
        return;
    }
    out.push_str("\n### Live fan-out: per subscriber\n\n");
    out.push_str("| variant | system | reading subscribers | each received (min – max) | dropped (min – max) | readers cut off | stalled: received | stalled: dropped | stalled cut off |\n");
    out.push_str("|---|---|---:|---|---|---:|---:|---:|---|\n");
    for run in live {
        let readers: Vec<_> = run.subscribers.iter().filter(|s| !s.stalled).collect();
        let min_max = |f: &dyn Fn(&&crate::report::SubscriberCount) -> u64| {
            let min = readers.iter().map(&f).min().unwrap_or(0);
            let max = readers.iter().map(&f).max().unwrap_or(0);
            format!("{min} – {max}")
        };
        let cut = readers.iter().filter(|s| s.disconnected).count();
        let stalled = run
            .subscribers
            .iter()
            .find(|s| s.stalled)
            .copied()
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {cut} | {} | {} | {} |",
            run.variant,
            run.system,
            readers.len(),
            min_max(&|s| s.delivered),
            min_max(&|s| s.dropped),
            stalled.delivered,
            stalled.dropped,
            if stalled.disconnected { "yes" } else { "no" },
        );
    }
}

fn notes(out: &mut String, runs: &[RunReport]) {
    let mut lines = Vec::new();
    for run in runs {
        let label = format!(
            "{} / {} / {} / {}",
            run.workload, run.variant, run.durability, run.system
        );
        if !run.passed() {
            for problem in &run.verdict.problems {
                lines.push(format!("- **FAIL** {label}: {problem}"));
            }
        }
        for note in &run.notes {
            lines.push(format!("- {label}: {note}"));
        }
    }
    if !lines.is_empty() {
        out.push_str("\n### Notes and failed checks\n\n");
        out.push_str(&lines.join("\n"));
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Verdict;

    fn run(system: &str, msgs_per_s: f64, passed: bool) -> RunReport {
        RunReport {
            workload: "retry".into(),
            variant: "1 KiB".into(),
            system: system.into(),
            durability: "strict".into(),
            msgs_per_s,
            verdict: if passed {
                Verdict::from_problems(vec![])
            } else {
                Verdict::from_problems(vec!["lost 3".into()])
            },
            ..RunReport::default()
        }
    }

    // Proves a failed run shows FAIL with its problem and never a figure, and that ratios
    // are only computed against a mailroom run that passed.
    #[test]
    fn failed_runs_show_no_figures() {
        let table = render(&[run("mailroom", 50.0, false), run("redis", 100.0, true)]);
        assert!(table.contains("| mailroom | FAIL |"), "{table}");
        assert!(
            table.contains("**FAIL** retry / 1 KiB / strict / mailroom: lost 3"),
            "{table}"
        );
        assert!(!table.contains("0.50"), "{table}");
    }

    // Proves repeated rounds collapse to the median run with every round's rate noted,
    // and that a failed round still shows as FAIL beside the median of the others.
    #[test]
    fn rounds_collapse_to_the_median() {
        let table = render(&[
            run("redis", 300.0, true),
            run("redis", 100.0, true),
            run("redis", 200.0, true),
            run("redis", 999.0, false),
        ]);
        let rows: Vec<_> = table.lines().filter(|l| l.contains("| redis |")).collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(rows.iter().any(|r| r.contains("| 200 |")), "{table}");
        assert!(rows.iter().any(|r| r.contains("FAIL")), "{table}");
        assert!(
            table.contains("median of 3 rounds, msgs/s in round order: 300, 100, 200"),
            "{table}"
        );
    }

    // Proves the throughput ratio is mailroom over peer, on the peer's row.
    #[test]
    fn ratio_is_mailroom_over_peer() {
        let table = render(&[run("redis", 100.0, true), run("mailroom", 50.0, true)]);
        let redis_row = table
            .lines()
            .find(|line| line.contains("| redis |"))
            .unwrap();
        assert!(redis_row.contains("| 0.50 |"), "{redis_row}");
        let first = table
            .lines()
            .position(|l| l.contains("| mailroom |"))
            .unwrap();
        let second = table.lines().position(|l| l.contains("| redis |")).unwrap();
        assert!(first < second, "mailroom row first");
    }
}
