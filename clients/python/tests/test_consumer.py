"""The consumer loop, sync and asyncio: acks, nacks with the exception, lease touches, and
a kill -9 of the server mid-consume followed by a restart on the same data and port."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest
from conftest import Server

from mailroom import AsyncClient, Client, Delivery
from mailroom.models import ItemResult

CONDITION_WAIT_S = 30.0
"""How long a test waits for a condition before it fails."""


def wait_for(condition: Any, what: str) -> None:
    """Waits (polling) until ``condition()`` holds."""
    deadline = time.monotonic() + CONDITION_WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"waited {CONDITION_WAIT_S}s for {what}"
        time.sleep(0.01)


def test_run_acks_and_nacks_with_the_exception(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1)
    client.publish_batch("orders", ["ok 0", "bad 1", "ok 2", "ok 3", "bad 4", "ok 5"])
    consumer = client.group("orders", "billing").consume(batch=4, wait_ms=100)
    seen: list[int] = []

    def handle(delivery: Delivery) -> None:
        seen.append(delivery.offset)
        if len(seen) == 6:
            consumer.stop()
        if delivery.text.startswith("bad"):
            raise ValueError(f"cannot handle {delivery.text}")

    consumer.run(handle)
    assert seen == [0, 1, 2, 3, 4, 5]
    assert (consumer.stats.acked, consumer.stats.failed) == (4, 2)
    info = client.group_info("orders", "billing")
    assert (info.position, info.dead_letters) == (6, 2)
    reasons = [note.reason for note in info.dead_letter_notes]
    assert reasons == ["ValueError: cannot handle bad 1", "ValueError: cannot handle bad 4"]


def test_an_exception_leaving_the_loop_nacks_it_and_releases_the_rest(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1, max_in_flight=8)
    client.publish_batch("orders", ["a", "b", "c", "d"])
    with pytest.raises(RuntimeError, match="stop at b"):
        with client.group("orders", "billing").consume(batch=4) as consumer:
            for delivery in consumer:
                if delivery.text == "b":
                    raise RuntimeError("stop at b")
    assert (consumer.stats.acked, consumer.stats.failed, consumer.stats.released) == (1, 1, 2)
    info = client.group_info("orders", "billing")
    assert (info.position, info.dead_letters, info.counters.releases) == (2, 1, 2)
    assert info.dead_letter_notes[0].reason == "RuntimeError: stop at b"


def test_a_slow_handler_keeps_its_lease(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1, lease_ms=300)
    client.publish("orders", "slow")
    consumer = client.group("orders", "billing").consume(batch=1, wait_ms=50)
    for delivery in consumer:
        time.sleep(1.2)  # four leases long: only the touches keep it
        consumer.stop()
    assert consumer.stats.acked == 1
    info = client.group_info("orders", "billing")
    assert (info.position, info.dead_letters, info.counters.expired_leases) == (1, 0, 0)


MESSAGES = 300
"""Messages of the restart tests: enough that the kill lands mid-consume."""


def check_after_restart(client: Client, handled: Counter[int], results: list[ItemResult]) -> None:
    """Nothing lost (every message handled and the group past it), nothing acked twice."""
    assert set(handled) == set(range(MESSAGES))
    acked = Counter(r.offset for r in results if r.outcome == "acked")
    assert max(acked.values()) == 1, "an offset was acked twice"
    settled = set(acked) | {r.offset for r in results if r.error is not None}
    assert settled == set(range(MESSAGES))
    info = client.group_info("orders", "billing")
    assert (info.position, info.lag, info.dead_letters, info.deliveries) == (MESSAGES, 0, 0, [])


def prepare(server: Server) -> Client:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 5, lease_ms=60_000)
    client.publish_batch("orders", [f"m{i}" for i in range(MESSAGES)])
    return client


def test_the_loop_rides_out_a_kill_and_restart(server: Server) -> None:
    client = prepare(server)
    handled: Counter[int] = Counter()
    results: list[ItemResult] = []
    consumer = client.group("orders", "billing").consume(
        batch=16, consumer="c1", wait_ms=200, on_result=results.append
    )

    def handle(delivery: Delivery) -> None:
        handled[delivery.offset] += 1
        time.sleep(0.002)
        if len(handled) == MESSAGES:
            consumer.stop()

    worker = threading.Thread(target=consumer.run, args=(handle,))
    worker.start()
    wait_for(lambda: len(handled) >= MESSAGES // 3, "a third handled")
    server.restart()
    worker.join(CONDITION_WAIT_S)
    assert not worker.is_alive()
    assert consumer.stats.reconnects > 0
    check_after_restart(client, handled, results)


def test_the_async_loop_rides_out_a_kill_and_restart(server: Server) -> None:
    client = prepare(server)
    handled: Counter[int] = Counter()
    results: list[ItemResult] = []

    async def main() -> int:
        aclient = AsyncClient(server.url)
        consumer = aclient.group("orders", "billing").consume(
            batch=16, consumer="c1", wait_ms=200, on_result=results.append
        )

        async def handle(delivery: Delivery) -> None:
            handled[delivery.offset] += 1
            await asyncio.sleep(0.002)
            if len(handled) == MESSAGES // 3:
                # Kill and restart off the event loop, while the loop is mid-consume.
                threading.Thread(target=server.restart).start()
            if len(handled) == MESSAGES:
                consumer.stop()

        await asyncio.wait_for(consumer.run(handle), CONDITION_WAIT_S)
        await aclient.close()
        return consumer.stats.reconnects

    assert asyncio.run(main()) > 0
    check_after_restart(client, handled, results)
