#!/usr/bin/env python3
"""Turns criterion's output for benches/broadcast.rs into the markdown table of medians.

Usage: python3 crates/mailroom/scripts/bench-broadcast-table.py <target-dir>/criterion
"""
import json
import pathlib
import sys

PEERS = ["mailroom", "tokio", "async-broadcast", "mutex-vecdeque"]


def median_ns_per_delivery(root, group, peer, n):
    bench = root / group / peer / str(n)
    try:
        estimates = json.loads((bench / "new" / "estimates.json").read_text())
        meta = json.loads((bench / "new" / "benchmark.json").read_text())
    except FileNotFoundError:
        return None
    elements = meta["throughput"]["Elements"]
    return estimates["median"]["point_estimate"] / elements


def table(root, group, sizes):
    print(f"\n### {group}\n")
    print("| N | " + " | ".join(f"{p} ns/deliv (M/s)" for p in PEERS) + " | mailroom speed-up vs tokio / async-broadcast / mutex-vecdeque |")
    print("|---" * (len(PEERS) + 2) + "|")
    for n in sizes:
        cells, ns = [], {}
        for peer in PEERS:
            v = median_ns_per_delivery(root, group, peer, n)
            ns[peer] = v
            cells.append("-" if v is None else f"{v:.2f} ({1e3 / v:.0f})")
        ratios = []
        for peer in PEERS[1:]:
            if ns["mailroom"] and ns[peer]:
                ratios.append(f"{ns[peer] / ns['mailroom']:.2f}x")
            else:
                ratios.append("-")
        print(f"| {n} | " + " | ".join(cells) + " | " + " / ".join(ratios) + " |")


def main():
    root = pathlib.Path(sys.argv[1])
    table(root, "burst", [1, 4, 16, 64, 256, 1024])
    table(root, "threaded", [1, 4, 16])
    print("\n### slow consumer (healthy subscribers' deliveries only)\n")
    print("| regime | peer | healthy ns/deliv, stall | ns/deliv, no stall | healthy rate kept |")
    print("|---|---|---|---|---|")
    for group, base, n in [("stall_burst", "burst", 16), ("stall_threaded", "threaded", 4)]:
        for peer in PEERS:
            stall = median_ns_per_delivery(root, group, peer, n)
            clean = median_ns_per_delivery(root, base, peer, n)
            if stall and clean:
                print(f"| {group} N={n} | {peer} | {stall:.2f} | {clean:.2f} | {100 * clean / stall:.0f}% |")


if __name__ == "__main__":
    main()
