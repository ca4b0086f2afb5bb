"""The routes added with message metadata and group moves, against a real server: seek,
pause, resume, topic recover and repair, keys and headers on publish, and the new view
fields (sync and asyncio clients)."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import Server

from mailroom import AsyncClient, Client, errors, models


def test_seek_moves_the_group_and_fences_old_deliveries(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 5)
    client.publish_batch("orders", ["a", "b"])
    first = client.poll("orders", "billing")
    assert first is not None and first.offset == 0
    client.ack("orders", "billing", first)
    assert client.seek("orders", "billing", 0) == models.GroupSeeked("orders", "billing", 0)
    again = client.poll("orders", "billing")
    assert again is not None and (again.offset, again.text) == (0, "a")
    assert again.attempt > first.attempt
    assert client.seek("orders", "billing", "latest").position == 2
    with pytest.raises(errors.NotOwned):
        client.ack("orders", "billing", again)
    assert client.seek("orders", "billing", "earliest").position == 0
    with pytest.raises(errors.InvalidArgument):
        client.seek("orders", "billing", 99)
    with pytest.raises(errors.UnknownGroup):
        client.seek("orders", "nobody", 0)


def test_pause_stops_deliveries_until_resume(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    client.create_group("orders", "billing", 5)
    client.publish("orders", "a")
    paused = client.pause("orders", "billing")
    assert (paused.paused, paused.changed, paused.paused_until_ms) == (True, True, None)
    assert client.poll("orders", "billing") is None
    assert client.group_info("orders", "billing").paused is True
    assert client.resume("orders", "billing").changed is True
    assert client.resume("orders", "billing").changed is False
    assert client.group_info("orders", "billing").paused is False
    delivery = client.poll("orders", "billing")
    assert delivery is not None and delivery.text == "a"
    until = int(time.time() * 1000) + 60_000
    timed = client.pause("orders", "billing", until_ms=until)
    assert timed.paused_until_ms == until
    assert client.topic_info("orders").groups[0].paused_until_ms == until
    with pytest.raises(errors.InvalidArgument):
        client.pause("orders", "billing", until_ms=1)


def test_recover_and_repair_a_serving_topic(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("orders")
    assert client.recover_topic("orders") == models.TopicRecovered("orders", False)
    report = client.repair_topic("orders")
    assert (report.topic, report.repaired) == ("orders", False)
    info = client.topic_info("orders")
    assert (info.state, info.failure, info.failure_kind) == ("ok", None, None)
    assert client.list_topics()[0].state == "ok"
    assert client.health().status == "ok"
    with pytest.raises(errors.UnknownTopic):
        client.recover_topic("nothing")
    with pytest.raises(errors.UnknownTopic):
        client.repair_topic("nothing")


def test_keys_and_headers_reach_every_kind_of_poll(server: Server) -> None:
    client = Client(server.url)
    client.create_topic("events")
    client.create_group("events", "audit", 1)
    before = int(time.time() * 1000)
    client.publish("events", "signed up", key="customer-7", headers={"trace": "t1"})
    message = models.Message(bytes([0, 255]), key="k2", headers={"Content-Type": "bin"})
    assert client.publish_batch("events", ["plain", message]) == [1, 2]
    first = client.poll_raw("events", "audit")
    assert first is not None
    assert (first.key, first.headers, first.text) == ("customer-7", {"trace": "t1"}, "signed up")
    assert first.published_at_ms is not None and first.published_at_ms >= before - 1000
    client.ack("events", "audit", first)
    plain = client.poll("events", "audit")
    assert plain is not None and (plain.key, plain.headers) == (None, None)
    client.nack("events", "audit", plain)
    batch = client.poll_batch("events", "audit", 1)
    binary = batch.deliveries[0]
    assert (binary.payload, binary.key, binary.headers) == (
        bytes([0, 255]),
        "k2",
        {"Content-Type": "bin"},
    )
    client.nack("events", "audit", binary)
    letters = list(client.dead_letters("events", "audit"))
    assert [(d.offset, d.key) for d in letters] == [(1, None), (2, "k2")]
    assert letters[1].headers == {"Content-Type": "bin"} and letters[1].published_at_ms
    with pytest.raises(errors.InvalidArgument):
        client.publish("events", "x", key="")


def test_the_asyncio_client_has_the_same_calls(server: Server) -> None:
    async def run() -> None:
        async with AsyncClient(server.url) as client:
            await client.create_topic("orders")
            await client.create_group("orders", "billing", 3)
            await client.publish("orders", "a", key="k", headers={"h": "v"})
            assert (await client.pause("orders", "billing")).paused is True
            assert await client.poll("orders", "billing") is None
            assert (await client.resume("orders", "billing")).changed is True
            delivery = await client.poll("orders", "billing")
            assert delivery is not None and (delivery.key, delivery.headers) == ("k", {"h": "v"})
            assert (await client.seek("orders", "billing", "earliest")).position == 0
            with pytest.raises(errors.NotOwned):
                await client.ack("orders", "billing", delivery)
            assert (await client.recover_topic("orders")).recovered is False
            assert (await client.repair_topic("orders")).repaired is False
            channel = await client.create_channel("live")
            assert channel and (await client.channel_info("live")).mailbox_bytes > 0

    asyncio.run(run())
