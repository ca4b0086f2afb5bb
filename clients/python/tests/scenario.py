"""Runs one scenario of ``clients/behaviour/*.json`` against the sync or the asyncio client.

One interpreter for both: a step's call returns a value (sync) or a coroutine (asyncio),
and ``settle`` awaits the latter.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from conftest import REPO, Server
from scenario_streams import PUBLISH_OPS, STREAM_OPS, StreamSteps, messages

import mailroom
from mailroom import ApiError
from mailroom.models import DeliveryRef

BEHAVIOUR = REPO / "clients" / "behaviour"


def scenarios() -> list[tuple[str, dict[str, Any]]]:
    """Every scenario as ``(file: name, scenario)``."""
    found = []
    for path in sorted(BEHAVIOUR.glob("*.json")):
        for scenario in json.loads(path.read_text())["scenarios"]:
            found.append((f"{path.stem}: {scenario['name']}", scenario))
    return found


async def settle(value: Any) -> Any:
    """The value, awaited if it is a coroutine."""
    if inspect.isawaitable(value):
        return await value
    return value


def payload(spec: Any) -> bytes:
    """A scenario's payload: text, or ``{"base64": ...}``."""
    if isinstance(spec, dict):
        return base64.b64decode(spec["base64"])
    return str(spec).encode("utf-8")


def plain(value: Any) -> Any:
    """A client's answer as JSON-like data (dataclasses as dicts; bytes stay bytes)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {key: plain(item) for key, item in asdict(value).items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def check(expected: Any, actual: Any, where: str) -> None:
    """Asserts ``actual`` matches ``expected`` as the suite's README defines a match."""
    if isinstance(actual, (bytes, bytearray)):
        assert payload(expected) == bytes(actual), f"{where}: {expected!r} != {actual!r}"
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, item in expected.items():
            assert key in actual, f"{where}: no {key!r} in {actual!r}"
            check(item, actual[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(expected) == len(actual), f"{where}: {expected!r} != {actual!r}"
        for index, (item, got) in enumerate(zip(expected, actual)):
            check(item, got, f"{where}[{index}]")
    else:
        assert expected == actual, f"{where}: {expected!r} != {actual!r}"


def refs(pairs: list[list[int]]) -> list[DeliveryRef]:
    """``[[offset, attempt], ...]`` as delivery references."""
    return [DeliveryRef(offset, attempt) for offset, attempt in pairs]


def results(items: Any) -> list[dict[str, Any]]:
    """Batch results in the suite's form: ``{"outcome"}`` or ``{"error": code}``."""
    return [
        {"error": item.error.code} if item.error is not None else {"outcome": item.outcome}
        for item in items or []
    ]


class Runner:
    """The state of one scenario run: the client, the server and open subscriptions."""

    def __init__(self, server: Server, asynchronous: bool) -> None:
        self.server = server
        self.asynchronous = asynchronous
        self.client: Any = self.connect()
        self.subscriptions: dict[str, Any] = {}
        self.streams = StreamSteps()

    def connect(self) -> Any:
        if self.asynchronous:
            return mailroom.AsyncClient(self.server.url)
        return mailroom.Client(self.server.url)

    async def close(self) -> None:
        await self.streams.close()
        for subscription in self.subscriptions.values():
            await settle(subscription.close())
        await settle(self.client.close())

    async def run(self, scenario: dict[str, Any]) -> None:
        for index, step in enumerate(scenario["steps"]):
            merged = {**{k: scenario[k] for k in ("topic", "group", "channel") if k in scenario}}
            merged.update(step)
            where = f"step {index} ({step['op']})"
            try:
                answer = await self.step(merged)
            except ApiError as error:
                assert "error" in step, f"{where}: unexpected {error!r}"
                assert error.code == step["error"], f"{where}: {error.code} != {step['error']}"
                continue
            assert "error" not in step, f"{where}: expected {step['error']}, got {answer!r}"
            if "expect" in step:
                check(step["expect"], plain(answer), where)
            if "acked" in step:
                check(step["acked"], self.last_acked, f"{where}.acked")
            if "nacked" in step:
                check(step["nacked"], self.last_nacked, f"{where}.nacked")

    async def step(self, s: dict[str, Any]) -> Any:
        op, c = s["op"], self.client
        topic, group, channel = s.get("topic"), s.get("group"), s.get("channel")
        nack_options = {k: s[k] for k in ("kind", "reason", "delay_ms") if k in s}
        if op == "create_topic":
            return await settle(c.create_topic(topic))
        if op == "delete_topic":
            return await settle(c.delete_topic(topic))
        if op == "create_group":
            options = {k: s[k] for k in ("start", "lease_ms", "max_in_flight") if k in s}
            return await settle(c.create_group(topic, group, s["max_attempts"], **options))
        if op == "delete_group":
            return await settle(c.delete_group(topic, group))
        if op == "publish":
            key = s.get("idempotency_key")
            return await settle(c.publish(topic, payload(s["payload"]), idempotency_key=key))
        if op == "publish_batch":
            return await settle(c.publish_batch(topic, [payload(p) for p in s["payloads"]]))
        if op == "publish_stream":
            items = messages(s["messages"]) if "messages" in s else [payload(p) for p in s["payloads"]]
            return await self.publish_stream(topic, items)
        if op in PUBLISH_OPS:
            return await self.streams.publish_step(c, s)
        if op in STREAM_OPS:
            return await self.streams.step(c, s)
        if op == "poll":
            return await settle(c.poll(topic, group, s.get("consumer")))
        if op == "poll_batch":
            return await self.poll_batch(s)
        if op == "ack":
            return await settle(c.ack(topic, group, DeliveryRef(s["offset"], s["attempt"])))
        if op == "touch":
            return await settle(c.touch(topic, group, DeliveryRef(s["offset"], s["attempt"])))
        if op == "nack":
            ref = DeliveryRef(s["offset"], s["attempt"])
            return await settle(c.nack(topic, group, ref, **nack_options))
        if op == "ack_batch":
            return results(await settle(c.ack_batch(topic, group, refs(s["deliveries"]))))
        if op == "nack_batch":
            answer = c.nack_batch(topic, group, refs(s["deliveries"]), **nack_options)
            return results(await settle(answer))
        if op == "group":
            return await settle(c.group_info(topic, group))
        if op == "topic":
            return await settle(c.topic_info(topic))
        if op == "dead_letters":
            return await self.dead_letters(topic, group)
        if op == "seek":
            return await settle(c.seek(topic, group, s["to"]))
        if op in ("pause", "resume"):
            return await settle(getattr(c, op)(topic, group))
        if op in ("redrive", "purge"):
            return await settle(getattr(c, op)(topic, group, s.get("from"), s.get("to")))
        return await self.channel_step(op, channel, s)

    async def channel_step(self, op: str, channel: str, s: dict[str, Any]) -> Any:
        c = self.client
        if op == "create_channel":
            options = {k: s[k] for k in ("max_subscribers", "mailbox_capacity") if k in s}
            return await settle(c.create_channel(channel, **options))
        if op == "close_channel":
            return await settle(c.close_channel(channel))
        if op == "channel":
            info = plain(await settle(c.channel_info(channel)))
            return {**info, "dropped_some": info["dropped"] > 0}
        if op == "publish_channel":
            return await settle(c.publish_channel(channel, payload(s["payload"])))
        if op == "subscribe":
            self.subscriptions[s["as"]] = await settle(c.subscribe(channel, s["transport"]))
            return None
        if op == "receive":
            return await settle(self.subscriptions[s["sub"]].next())
        if op == "flood":
            return await self.flood(channel, s["payload_bytes"], s["publishes_max"])
        if op == "restart":
            await settle(c.close())
            self.server.restart()
            self.client = self.connect()
            return None
        raise AssertionError(f"unknown op {op}")

    async def poll_batch(self, s: dict[str, Any]) -> Any:
        c, topic, group = self.client, s["topic"], s["group"]
        ack = refs(s["ack"]) if "ack" in s else None
        options = {"consumer": s.get("consumer"), "wait_ms": s.get("wait_ms", 0), "ack": ack}
        if "nack" in s:
            options["nack"] = refs(s["nack"]["deliveries"])
            for key in ("kind", "reason", "delay_ms"):
                if key in s["nack"]:
                    options[f"nack_{key}"] = s["nack"][key]
        if "publish_meanwhile" not in s:
            batch = await settle(c.poll_batch(topic, group, s["max"], **options))
        else:
            batch = await self.poll_while_publishing(s, options)
        self.last_acked = results(batch.acked)
        self.last_nacked = results(batch.nacked)
        return batch.deliveries

    async def poll_while_publishing(self, s: dict[str, Any], options: dict[str, Any]) -> Any:
        """A long poll, with a publish from another client once the poll is waiting."""
        publisher = mailroom.Client(self.server.url)

        def publish_later() -> None:
            # The long poll is held until a delivery exists, so the order is not raced:
            # published before or after the poll starts, the poll answers with it.
            publisher.publish(s["topic"], payload(s["publish_meanwhile"]))

        loop = asyncio.get_running_loop()
        if self.asynchronous:
            polled = self.client.poll_batch(s["topic"], s["group"], s["max"], **options)
            batch, _ = await asyncio.gather(polled, loop.run_in_executor(None, publish_later))
        else:
            polled = loop.run_in_executor(
                None, lambda: self.client.poll_batch(s["topic"], s["group"], s["max"], **options)
            )
            batch, _ = await asyncio.gather(polled, loop.run_in_executor(None, publish_later))
        publisher.close()
        return batch

    async def publish_stream(self, topic: str, payloads: list[Any]) -> list[int]:
        stream = await settle(self.client.publish_stream(topic))
        try:
            for item in payloads:
                await settle(stream.send(item))
            confirmations = await settle(stream.flush())
        finally:
            await settle(stream.close())
        return [offset for confirmation in confirmations for offset in confirmation.offsets()]

    async def dead_letters(self, topic: str, group: str) -> list[Any]:
        letters = self.client.dead_letters(topic, group)
        if self.asynchronous:
            return [letter async for letter in letters]
        return list(letters)

    async def flood(self, channel: str, payload_bytes: int, publishes_max: int) -> Any:
        """Publishes big messages until one is dropped for a subscriber that does not read."""
        message = b"x" * payload_bytes
        for _ in range(publishes_max):
            answer = await settle(self.client.publish_channel(channel, message))
            if answer.dropped > 0:
                return {"dropped_some": True}
        return {"dropped_some": False}


def run_scenario(server: Server, scenario: dict[str, Any], asynchronous: bool) -> None:
    """Runs ``scenario`` to the end (its asserts fail the test)."""

    async def main() -> None:
        runner = Runner(server, asynchronous)
        try:
            await runner.run(scenario)
        finally:
            await runner.close()

    asyncio.run(main())
