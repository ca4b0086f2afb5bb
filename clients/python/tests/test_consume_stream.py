"""The consume stream, sync and asyncio, against a real server: the window, settlements
answered in order, a disconnect leaving deliveries to the same consumer, bad input, and
the consumer loop over it (acks, nacks with the exception, lease touches, and a kill -9
of the server mid-stream followed by a restart on the same data and port)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest
from conftest import Server
from test_consumer import CONDITION_WAIT_S, MESSAGES, check_after_restart, wait_for

from mailroom import AsyncClient, Client, Delivery, errors, models
from mailroom.models import ItemResult


def prepare_window(server: Server, messages: int = 6, max_in_flight: int = 8) -> Client:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 2, max_in_flight=max_in_flight, lease_ms=60_000)
    if messages > 0:
        client.publish_batch("orders", [f"m{i}" for i in range(messages)])
    return client


def test_the_stream_keeps_its_window_and_answers_in_order(server: Server) -> None:
    client = prepare_window(server)
    with client.consume_stream("orders", "billing", window=2, consumer="w1") as stream:
        assert (stream.consumer, stream.window) == ("w1", 2)
        first, second = stream.receive(timeout=10), stream.receive(timeout=10)
        assert first is not None and second is not None
        assert [(d.offset, d.text) for d in (first, second)] == [(0, "m0"), (1, "m1")]
        # The window holds: a third delivery comes only once one is settled.
        with pytest.raises(TimeoutError):
            stream.receive(timeout=0.3)
        assert [stream.touch(first), stream.ack(first), stream.ack(first)] == [0, 1, 2]
        assert stream.nack(second, kind="release", reason="busy") == 3
        answers = stream.flush(timeout=10)
        assert [(a.seq, a.op, a.outcome) for a in answers] == [
            (0, "touch", "touched"), (1, "ack", "acked"), (2, "ack", None), (3, "nack", "released")
        ]
        assert answers[2].error is not None and answers[2].error.code == "not_owned"
        third = stream.receive(timeout=10)
        assert third is not None and (third.offset, third.attempt) in ((1, 2), (2, 1))
    info = client.group_info("orders", "billing")
    assert info.counters.releases == 1 and len(info.deliveries) == 2


def test_a_reopened_stream_gets_its_deliveries_back(server: Server) -> None:
    client = prepare_window(server)
    with client.consume_stream("orders", "billing", window=3) as stream:
        made_up = stream.consumer
        held = [stream.receive(timeout=10) for _ in range(3)]
    assert made_up.startswith("stream-")
    with client.group("orders", "billing").consume_stream(3, consumer=made_up) as stream:
        again = [stream.receive(timeout=10) for _ in range(3)]
        assert again == held, "the same deliveries, with the same attempts"
        for delivery in again:
            assert delivery is not None
            stream.ack(delivery)
        assert [a.outcome for a in stream.flush(timeout=10)] == ["acked"] * 3
    assert client.group_info("orders", "billing").position == 3


def test_bad_input_is_refused(server: Server) -> None:
    client = prepare_window(server, max_in_flight=4)
    with pytest.raises(ValueError):
        client.consume_stream("orders", "billing", window=0)
    with pytest.raises(errors.InvalidArgument):
        client.consume_stream("orders", "billing", window=5)
    with pytest.raises(errors.UnknownGroup):
        client.consume_stream("orders", "nobody")
    with pytest.raises(errors.InvalidArgument):
        client.consume_stream("orders", "billing", consumer="")
    with client.consume_stream("orders", "billing") as stream:
        delivery = stream.receive(timeout=10)
        assert delivery is not None
        stream.nack(delivery, delay_ms=10**12)  # past the 7 days a delay may be
        (answer,) = stream.flush(timeout=10)
        assert answer.error is not None and answer.error.code == "invalid_argument"


def test_a_deleted_group_closes_the_stream(server: Server) -> None:
    client = prepare_window(server, messages=0)
    stream = client.consume_stream("orders", "billing")
    client.delete_group("orders", "billing")
    assert stream.receive(timeout=10) is None
    assert stream.closed == "unknown_group"
    with pytest.raises(errors.StreamClosed):
        stream.ack(models.DeliveryRef(0, 1))
    stream.close()


def test_the_async_stream_keeps_its_window_and_answers_in_order(server: Server) -> None:
    prepare_window(server)

    async def main() -> None:
        client = AsyncClient(server.url)
        async with await client.consume_stream("orders", "billing", 2, "w1") as stream:
            first, second = await stream.receive(10), await stream.receive(10)
            assert first is not None and second is not None
            with pytest.raises(TimeoutError):
                await stream.receive(timeout=0.3)
            assert await stream.ack(first) == 0
            assert await stream.nack(second, kind="reject", reason="bad") == 1
            answers = await stream.flush(10)
            assert [(a.seq, a.outcome) for a in answers] == [(0, "acked"), (1, "dead_lettered")]
            received = []
            async for delivery in stream:
                received.append(delivery.offset)
                await stream.ack(delivery)
                if len(received) == 4:
                    break
            assert received == [2, 3, 4, 5]
            assert [a.outcome for a in await stream.flush(10)] == ["acked"] * 4
        info = await client.group_info("orders", "billing")
        assert (info.position, info.dead_letters) == (6, 1)
        await client.close()

    asyncio.run(main())


def test_the_stream_loop_acks_and_nacks_with_the_exception(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1, max_in_flight=4)
    client.publish_batch("orders", ["ok 0", "bad 1", "ok 2", "ok 3", "bad 4", "ok 5"])
    consumer = client.group("orders", "billing").consume(batch=4, stream=True)
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


def test_an_exception_leaving_the_stream_loop_nacks_it_and_releases_the_rest(
    server: Server,
) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1, max_in_flight=8, lease_ms=60_000)
    client.publish_batch("orders", ["a", "b", "c", "d"])
    with pytest.raises(RuntimeError, match="stop at b"):
        with client.group("orders", "billing").consume(stream=True, window=4) as consumer:
            for delivery in consumer:
                if delivery.text == "b":
                    stream = consumer._stream
                    assert stream is not None
                    wait_for(lambda: len(stream.buffered()) == 2, "c and d received")
                    raise RuntimeError("stop at b")
    assert (consumer.stats.acked, consumer.stats.failed, consumer.stats.released) == (1, 1, 2)
    info = client.group_info("orders", "billing")
    assert (info.position, info.dead_letters, info.counters.releases) == (2, 1, 2)
    assert info.dead_letter_notes[0].reason == "RuntimeError: stop at b"


def test_the_stream_loop_keeps_slow_leases_and_releases_what_it_left(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 1, lease_ms=300, max_in_flight=2)
    client.publish_batch("orders", ["slow", "waiting"])
    consumer = client.group("orders", "billing").consume(stream=True, window=2)
    for _ in consumer:
        time.sleep(1.2)  # four leases long: only the touches keep both
        consumer.stop()
    assert (consumer.stats.acked, consumer.stats.released) == (1, 1)
    info = client.group_info("orders", "billing")
    assert (info.position, info.counters.expired_leases, info.counters.releases) == (1, 0, 1)


def test_the_stream_loop_rides_out_a_kill_and_restart(server: Server) -> None:
    client = prepare_restart(server)
    handled: Counter[int] = Counter()
    results: list[ItemResult] = []
    consumer = client.group("orders", "billing").consume(
        stream=True, window=16, consumer="c1", on_result=results.append
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
    assert max(handled.values()) == 1, "a delivery was handed to the body twice"
    check_after_restart(client, handled, results)


def test_the_async_stream_loop_rides_out_a_kill_and_restart(server: Server) -> None:
    client = prepare_restart(server)
    handled: Counter[int] = Counter()
    results: list[ItemResult] = []

    async def main() -> int:
        aclient = AsyncClient(server.url)
        consumer = aclient.group("orders", "billing").consume(
            stream=True, window=16, on_result=results.append
        )

        async def handle(delivery: Delivery) -> None:
            handled[delivery.offset] += 1
            await asyncio.sleep(0.002)
            if len(handled) == MESSAGES // 3:
                # Kill and restart off the event loop, while the loop is mid-stream.
                threading.Thread(target=server.restart).start()
            if len(handled) == MESSAGES:
                consumer.stop()

        await asyncio.wait_for(consumer.run(handle), CONDITION_WAIT_S)
        await aclient.close()
        return consumer.stats.reconnects

    assert asyncio.run(main()) > 0
    assert max(handled.values()) == 1, "a delivery was handed to the body twice"
    check_after_restart(client, handled, results)


def prepare_restart(server: Server) -> Client:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 5, lease_ms=60_000, max_in_flight=16)
    client.publish_batch("orders", [f"m{i}" for i in range(MESSAGES)])
    return client
