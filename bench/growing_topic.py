#!/usr/bin/env python3
"""A topic polled from its first message while it grows: the poll's latency by how far
the log has grown (BENCHMARKS.md, "Plans made on a small segment").

Usage: bench/growing_topic.py HOST:PORT TOPIC MESSAGES

Makes TOPIC and group `g` (W 64) on the mailroom broker at HOST:PORT, then repeats:
publish 64 messages of 100 B in one batch, poll up to 64, ack them, until MESSAGES were
consumed. Prints the median poll, in ms, for each 10,000 messages of the log, and the
whole run's time. The benches fill a topic before they poll it, so they never see a plan
the database made while the topic's newest segment was small; this does.
"""

import json
import statistics
import sys
import time
import urllib.request


def main():
    host, topic, total = sys.argv[1], sys.argv[2], int(sys.argv[3])

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{host}{path}", method=method, data=data)
        with urllib.request.urlopen(request) as answer:
            return json.loads(answer.read() or b"null")

    group = f"/v1/topics/{topic}/groups/g"
    call("PUT", f"/v1/topics/{topic}")
    call("PUT", group, {"max_attempts": 3, "max_in_flight": 64})
    polls = {}
    done = 0
    start = time.time()
    while done < total:
        call("POST", f"/v1/topics/{topic}/messages/batch", {"messages": ["x" * 100] * 64})
        began = time.perf_counter()
        deliveries = call("POST", f"{group}/poll/batch", {"max": 64})["deliveries"]
        polls.setdefault(done // 10_000, []).append((time.perf_counter() - began) * 1000)
        ids = [{"offset": d["offset"], "attempt": d["attempt"]} for d in deliveries]
        call("POST", f"{group}/ack/batch", {"deliveries": ids})
        done += len(deliveries)
    medians = " ".join(
        f"{k * 10}k:{statistics.median(v):.2f}" for k, v in sorted(polls.items())
    )
    print(f"{host} {time.time() - start:.1f}s {medians}")


if __name__ == "__main__":
    main()
