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

const SYSTEM_ORDER: [&str; 5] = ["mailroom", "redis", "nats", "rabbitmq", "disk"];

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
    notes(&mut out, runs);
    out
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
