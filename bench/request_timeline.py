"""Cuts a `perf trace` of a mailroom server serving one strict publisher into per-request
parts (see bench/request-timeline.sh) and prints their medians and p90s.

Usage: request_timeline.py TRACE DISK.jsonl MAILROOM.jsonl
"""

import json
import re
import statistics
import sys

# "  30.647 ( 0.394 ms): tokio-rt-worke/16209  ... [continued]: fdatasync())  = 0" or
# "  30.580 ( 0.052 ms): tokio-rt-worke/16209 pwrite64(fd: 14, ..., count: 1048) = 1048"
LINE = re.compile(
    r"^\s*(?P<ts>[\d.]+) \(\s*(?P<dur>[\d.]+) ms\): (?P<comm>\S+)/(?P<tid>\d+)\s+"
    r"(?:\.\.\. \[continued\]: )?(?P<name>\w+)\((?P<args>.*?)\)+\s+= (?P<ret>-?\d+)"
)
# The request's body is 1 KiB: the reads of a whole request carry at least this much.
REQUEST_BYTES = 1000


def events(path):
    """Completed syscalls as (start ms, duration ms, thread, name, args, return)."""
    out = []
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            out.append((float(m["ts"]), float(m["dur"]), m["tid"], m["name"], m["args"],
                        int(m["ret"])))
    out.sort()
    return out


def fd(args):
    """The file descriptor a syscall's arguments name."""
    m = re.match(r"fd: (\d+)", args)
    return m and int(m[1])


def requests(evs):
    """Per request: when its bytes were read, its sync ran and its answer went out, and
    the syscalls between. The answer is the first write after the sync (mailroom answers
    with `writev`, Redis with `write`; Redis's append to its file is the `write` before
    the sync, counted with mailroom's `pwrite`s)."""
    found, current = [], None
    for ts, dur, tid, name, args, ret in evs:
        if name in ("recvfrom", "read") and "PEEK" not in args and ret >= REQUEST_BYTES:
            if current and "answer" in current:
                current["next_read"] = ts + dur
                found.append(current)
            current = {"read": ts + dur, "thread": tid, "fd": fd(args), "futex_wakes": 0,
                       "writes": 0, "threads": {tid}}
            continue
        if current is None or "answer" in current:
            continue
        current["threads"].add(tid)
        if name == "futex" and "WAKE" in args:
            current["futex_wakes"] += 1
        elif (name in ("pwrite64", "write") and fd(args) != current["fd"]
              and "sync_start" not in current):
            current["writes"] += 1
        elif name == "fdatasync" and "sync_start" not in current:
            current["sync_start"], current["sync_end"] = ts, ts + dur
        elif name in ("writev", "write") and fd(args) == current["fd"] and "sync_end" in current:
            current["answer"] = ts
            current["answer_thread"] = tid
    return [r for r in found if "next_read" in r]


def parts(r):
    return {
        "before": (r["sync_start"] - r["read"]) * 1000,
        "sync": (r["sync_end"] - r["sync_start"]) * 1000,
        "after": (r["answer"] - r["sync_end"]) * 1000,
        "outside": (r["next_read"] - r["answer"]) * 1000,
        "whole": (r["next_read"] - r["read"]) * 1000,
    }


def quantile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    trace, disk, mailroom = sys.argv[1:4]
    found = requests(events(trace))
    if len(found) < 10:
        sys.exit(f"only {len(found)} requests found in the trace")
    cut = [parts(r) for r in found]
    disk_run = json.loads(open(disk).readline())
    run = json.loads(open(mailroom).readline())
    print(f"requests cut: {len(found)}; {run['msgs_per_s']:.0f} msgs/s under the trace, "
          f"raw disk loop {disk_run['msgs_per_s']:.0f}/s "
          f"(÷ disk {run['msgs_per_s'] / disk_run['msgs_per_s']:.2f})")
    print("part     median µs   p90 µs   share of the median request")
    whole = statistics.median(c["whole"] for c in cut)
    for name in ("before", "sync", "after", "outside", "whole"):
        values = [c[name] for c in cut]
        median = statistics.median(values)
        print(f"{name:8} {median:9.0f} {quantile(values, 0.9):8.0f}   {median / whole:6.1%}")
    same = sum(r["answer_thread"] == r["thread"] for r in found)
    threads = statistics.median(len(r["threads"]) for r in found)
    print(f"per request: futex wakes {statistics.mean(r['futex_wakes'] for r in found):.2f}, "
          f"file writes before the sync {statistics.mean(r['writes'] for r in found):.2f}, "
          f"threads with a syscall (median) {threads:.0f}, "
          f"answered on the thread that read it {same / len(found):.0%}")


if __name__ == "__main__":
    main()
