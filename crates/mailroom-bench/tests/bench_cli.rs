//! Black-box tests of the `mailroom-bench` binary's offline paths: the table it renders from
//! collected results, and its refusal of bad arguments. (The broker runs themselves are
//! exercised by `bench/smoke.sh`, which needs the real brokers.)

use std::process::Command;

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mailroom-bench"))
}

fn line(system: &str, msgs_per_s: f64, passed: bool) -> String {
    let problems = if passed {
        "[]"
    } else {
        r#"["g0: lost (never delivered and acked): 1 e.g. [7]"]"#
    };
    format!(
        r#"{{"workload":"retry","variant":"1 KiB","system":"{system}","durability":"strict","durability_detail":"","messages":100,"seconds":1.0,"msgs_per_s":{msgs_per_s},"latency_kind":"","latency":{{"p50_us":10,"p99_us":20,"p999_us":30,"max_us":40,"samples":100}},"broker_cpu_s":null,"broker_peak_rss_bytes":null,"peak_rss_per_run":false,"verdict":{{"passed":{passed},"problems":{problems}}},"subscribers":[],"notes":[]}}"#
    )
}

// Proves `table` turns result lines into rows with the mailroom/peer ratio, and shows a run
// that failed its check as FAIL with the problem, never as a figure.
#[test]
fn table_renders_ratios_and_failures() {
    let path =
        std::env::temp_dir().join(format!("mailroom-bench-cli-{}.jsonl", std::process::id()));
    let lines = [
        line("mailroom", 300.0, true),
        line("redis", 100.0, true),
        line("nats", 999.0, false),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let output = bench()
        .args(["table", "--input"])
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(output.status.success(), "{output:?}");
    let table = String::from_utf8(output.stdout).unwrap();
    let redis = table
        .lines()
        .find(|l| l.contains("| redis |"))
        .expect("redis row");
    assert!(redis.contains("| 3.00 |"), "{redis}");
    let nats = table
        .lines()
        .find(|l| l.contains("| nats |"))
        .expect("nats row");
    assert!(nats.contains("FAIL") && !nats.contains("999"), "{nats}");
    assert!(
        table.contains("**FAIL** retry / 1 KiB / strict / nats: g0: lost"),
        "{table}"
    );
}

// Proves a payload size the message format cannot hold is refused before any connection is
// attempted (exit 1, not a result).
#[test]
fn run_refuses_impossible_payload_size() {
    let output = bench()
        .args([
            "run",
            "--system",
            "redis",
            "--address",
            "127.0.0.1:1",
            "--workload",
            "publish",
        ])
        .args(["--payload-bytes", "8"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--payload-bytes"));
}

// Proves the old W-consumers shape is refused outside mailroom's parallel workload (exit 1,
// before any connection), so a table row can never carry a shape that did not run.
#[test]
fn run_refuses_tasks_shape_outside_mailroom_parallel() {
    let output = bench()
        .args([
            "run",
            "--system",
            "redis",
            "--address",
            "127.0.0.1:1",
            "--workload",
            "parallel",
            "--mailroom-shape",
            "tasks",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("--mailroom-shape"));
}

// Proves a group window is refused outside mailroom's consume, retry and fanout workloads
// (exit 1, before any connection), so a row never names a window its groups did not have.
#[test]
fn run_refuses_a_group_window_where_no_group_takes_it() {
    for (system, workload) in [
        ("redis", "retry"),
        ("mailroom", "publish"),
        ("mailroom", "parallel"),
    ] {
        let output = bench()
            .args([
                "run",
                "--system",
                system,
                "--address",
                "127.0.0.1:1",
                "--workload",
                workload,
            ])
            .args(["--mailroom-group-window", "128"])
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{system} {workload}: {output:?}"
        );
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(
            said.contains("--mailroom-group-window"),
            "{system} {workload}: {said}"
        );
    }
}
