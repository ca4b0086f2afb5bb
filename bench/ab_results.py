#!/usr/bin/env python3
"""The A/B scripts' results (`strict-ab.sh`, `client-ab.sh`): tag each run, then tabulate.

    ab_results.py tag FILE LABEL ROUND
        marks the last line of FILE (a `mailroom-bench --out` JSON lines file) with who ran
        (LABEL) and in which round;
    ab_results.py table FILE LABEL... --ratio A/B [--ratio C/D ...]
        prints one Markdown row per workload (every run, and the median, per LABEL in the
        order given), a column per ratio of medians, then the first ratio paired round by
        round (within a round both sides met much the same machine), and exits 1 if any
        run failed its check.
"""

import json
import statistics
import sys


def tag(path, label, round_):
    lines = open(path).read().splitlines()
    last = json.loads(lines[-1])
    last["ab_label"] = label
    last["ab_round"] = int(round_)
    lines[-1] = json.dumps(last)
    open(path, "w").write("\n".join(lines) + "\n")


def row_key(run):
    return (run["workload"], run["variant"], run.get("durability", ""))


def table(path, labels, ratios):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    failed = [r for r in runs if not r["verdict"]["passed"]]
    rates = {}
    for r in runs:
        rates.setdefault(row_key(r), {}).setdefault(r["ab_label"], []).append(r["msgs_per_s"])
    print("| row | " + " | ".join(labels) + " | " + " | ".join(f"{a} / {b}" for a, b in ratios) + " |")
    print("|---|" + "---:|" * (len(labels) + len(ratios)))
    for key, by in rates.items():
        med = {l: statistics.median(by[l]) for l in labels if l in by}
        cells = []
        for l in labels:
            every = ", ".join(f"{v:,.0f}" for v in by.get(l, []))
            cells.append(f"{every} (median {med[l]:,.0f})" if l in med else "")
        shown = [f"{med[a] / med[b]:.2f}" if a in med and b in med else "" for a, b in ratios]
        print(f"| {' '.join(k for k in key if k)} | " + " | ".join(cells + shown) + " |")
    first_a, first_b = ratios[0]
    by_round = {row_key(r) + (r["ab_round"], r["ab_label"]): r["msgs_per_s"] for r in runs}
    for key in rates:
        rounds = sorted({k[3] for k in by_round if k[:3] == key})
        paired = [
            by_round[key + (n, first_a)] / by_round[key + (n, first_b)]
            for n in rounds
            if key + (n, first_a) in by_round and key + (n, first_b) in by_round
        ]
        if paired:
            name = " ".join(k for k in key if k)
            print(f"{name}: {first_a} / {first_b} per round " + ", ".join(f"{p:.2f}" for p in paired))
    print(f"{len(failed)} runs failed their check")
    return 1 if failed else 0


def main(argv):
    if len(argv) == 5 and argv[1] == "tag":
        tag(argv[2], argv[3], argv[4])
        return 0
    if len(argv) >= 4 and argv[1] == "table":
        labels, ratios, rest = [], [], argv[3:]
        while rest:
            word = rest.pop(0)
            if word == "--ratio" and rest:
                a, _, b = rest.pop(0).partition("/")
                ratios.append((a, b))
            else:
                labels.append(word)
        if ratios:
            return table(argv[2], labels, ratios)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
