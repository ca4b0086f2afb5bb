#!/usr/bin/env python3
"""Many topics polled in turn on one broker: a poll's latency by how many topics share it
(BENCHMARKS.md, "Many topics on one broker").

Usage: bench/many_topics.py HOST:PORT TOPICS PASSES PREFIX

Makes TOPICS topics named PREFIX0, PREFIX1, ... on the mailroom broker at HOST:PORT, each
with group `g` (W 16) and 16 x PASSES messages of 100 B, then makes PASSES passes over
them: in each, one `poll/batch` of 16 per topic, in turn, carrying the acks of that
topic's previous poll. Prints each pass's median and 90th-percentile poll, in ms. The
first pass is the broker's first call on each topic (its statements prepared and
planned); read the later ones.
"""

import http.client
import json
import statistics
import sys
import time


def main():
    host, port = sys.argv[1].split(":")
    topics, passes, prefix = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    connection = http.client.HTTPConnection(host, int(port))

    def call(method, path, body=None):
        data = None if body is None else json.dumps(body)
        headers = {"content-type": "application/json"}
        connection.request(method, path, body=data, headers=headers)
        answer = connection.getresponse()
        raw = answer.read()
        if answer.status >= 300:
            sys.exit(f"{method} {path}: {answer.status} {raw[:200]!r}")
        return json.loads(raw or b"null")

    names = [f"{prefix}{i}" for i in range(topics)]
    for topic in names:
        call("PUT", f"/v1/topics/{topic}")
        call("PUT", f"/v1/topics/{topic}/groups/g", {"max_attempts": 3, "max_in_flight": 16})
        messages = ["x" * 100] * (16 * passes)
        call("POST", f"/v1/topics/{topic}/messages/batch", {"messages": messages})
    held = {topic: [] for topic in names}
    for number in range(passes):
        polls = []
        for topic in names:
            began = time.perf_counter()
            body = {"max": 16, "ack": held[topic]}
            deliveries = call("POST", f"/v1/topics/{topic}/groups/g/poll/batch", body)
            polls.append((time.perf_counter() - began) * 1000)
            held[topic] = [
                {"offset": d["offset"], "attempt": d["attempt"]}
                for d in deliveries["deliveries"]
            ]
        p90 = sorted(polls)[int(len(polls) * 0.9)]
        print(f"topics {topics} pass {number}: median {statistics.median(polls):.3f} ms, p90 {p90:.3f} ms")


if __name__ == "__main__":
    main()
