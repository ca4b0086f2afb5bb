"""Idempotent publish against a real server (sync and asyncio clients): the idempotency
key on a single publish, on batch items and on publish stream frames, and the
``duplicate`` / ``duplicates`` answers; and the group handle's seek, pause and resume."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import Server

from mailroom import AsyncClient, Client, errors, models


def test_a_repeated_key_is_answered_as_a_duplicate(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    first = client.publish_once("orders", "invoice 7", "invoice-7")
    assert first == models.Published(0, duplicate=False)
    assert client.publish_once("orders", "invoice 7", "invoice-7") == models.Published(0, True)
    assert client.publish("orders", "again", idempotency_key="invoice-7") == 0
    assert client.publish("orders", "plain") == 1
    assert client.publish_once("orders", "other", "invoice-8") == models.Published(2, False)
    assert client.topic_info("orders").end == 3, "a duplicate was stored"
    with pytest.raises(errors.InvalidArgument):
        client.publish_once("orders", "x", "k" * 257)


def test_batch_items_carry_keys_and_the_answer_names_the_duplicates(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.publish("orders", "first", idempotency_key="a")
    answer = client.publish_batch_once(
        "orders",
        [
            models.Message("a again", idempotency_key="a"),
            "no key",
            models.Message("b", idempotency_key="b"),
            models.Message("b again", idempotency_key="b"),
        ],
    )
    assert answer == models.BatchPublished([0, 1, 2, 2], [0, 3])
    assert client.publish_batch("orders", [models.Message("b", idempotency_key="b")]) == [2]
    assert client.publish_batch_once("orders", ["c"]).duplicates == []
    assert client.topic_info("orders").end == 4


def test_the_publish_stream_confirms_duplicates(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    with client.publish_stream("orders") as stream:
        stream.send(models.Message("one", key="k1", idempotency_key="one"))
        stream.send("bare")
        stream.send(models.Message("one again", idempotency_key="one"))
        confirmations = stream.flush()
    offsets = [(o, c.duplicate) for c in confirmations for o in c.offsets()]
    assert offsets == [(0, False), (1, False), (0, True)]
    client.create_group("orders", "billing", 1, max_in_flight=4)
    polled = client.poll_batch("orders", "billing", 4).deliveries
    assert [(d.offset, d.text, d.key) for d in polled] == [(0, "one", "k1"), (1, "bare", None)]


def test_the_async_client_publishes_once(server: Server) -> None:
    async def main() -> None:
        client = AsyncClient(server.url)
        await client.create_topic("orders")
        assert await client.publish_once("orders", "x", "k") == models.Published(0, False)
        assert await client.publish("orders", "x", idempotency_key="k") == 0
        answer = await client.publish_batch_once("orders", [models.Message("y", idempotency_key="k")])
        assert answer == models.BatchPublished([0], [0])
        async with await client.publish_stream("orders") as stream:
            await stream.send(models.Message("z", idempotency_key="k"))
            (confirmation,) = await stream.flush()
        assert (confirmation.offset, confirmation.duplicate) == (0, True)
        assert (await client.topic_info("orders")).end == 1
        await client.close()

    asyncio.run(main())


def test_the_group_handle_seeks_pauses_and_resumes(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 5)
    client.publish_batch("orders", ["a", "b"])
    group = client.group("orders", "billing")
    assert group.seek("latest") == models.GroupSeeked("orders", "billing", 2)
    assert group.seek(1).position == 1
    assert (group.pause().paused, group.poll()) == (True, None)
    assert group.resume().changed is True
    delivery = group.poll()
    assert delivery is not None and delivery.text == "b"

    async def main() -> None:
        aclient = AsyncClient(server.url)
        agroup = aclient.group("orders", "billing")
        assert (await agroup.seek("earliest")).position == 0
        until_ms = int(time.time() * 1000) + 60_000
        assert (await agroup.pause(until_ms=until_ms)).paused_until_ms == until_ms
        assert (await agroup.resume()).changed is True
        await aclient.close()

    asyncio.run(main())
