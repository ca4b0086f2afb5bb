"""The behaviour suite's consume stream and idempotent publish steps, for both Python
clients (a step's call returns a value or a coroutine; ``settle`` awaits the latter)."""

from __future__ import annotations

from typing import Any

# The module, not its names: scenario imports this module while it is being loaded.
import scenario

import mailroom
from mailroom.models import DeliveryRef

STREAM_OPS = {
    "consume_stream",
    "stream_receive",
    "stream_ack",
    "stream_nack",
    "stream_touch",
    "stream_answers",
    "stream_close",
}

PUBLISH_OPS = {"publish_once", "publish_batch_once"}


def messages(items: list[dict[str, Any]]) -> list[mailroom.models.Message]:
    """The suite's ``messages``: ``{"payload", "idempotency_key"}`` objects."""
    return [
        mailroom.models.Message(scenario.payload(item["payload"]), idempotency_key=item.get("idempotency_key"))
        for item in items
    ]


def answer(settled: mailroom.models.Settled) -> dict[str, Any]:
    """A settlement's answer in the suite's form: ``{seq, outcome}`` or ``{seq, error}``."""
    if settled.error is not None:
        return {"seq": settled.seq, "error": settled.error.code}
    return {"seq": settled.seq, "outcome": settled.outcome}


class StreamSteps:
    """The open consume streams of one scenario run, by name."""

    def __init__(self) -> None:
        self.streams: dict[str, Any] = {}

    async def close(self) -> None:
        for stream in self.streams.values():
            await scenario.settle(stream.close())

    async def publish_step(self, client: Any, s: dict[str, Any]) -> Any:
        topic = s["topic"]
        if s["op"] == "publish_once":
            return await scenario.settle(client.publish_once(topic, scenario.payload(s["payload"]), s["idempotency_key"]))
        return await scenario.settle(client.publish_batch_once(topic, messages(s["messages"])))

    async def step(self, client: Any, s: dict[str, Any]) -> Any:
        op = s["op"]
        if op == "consume_stream":
            opening = client.consume_stream(s["topic"], s["group"], s.get("window", 1), s.get("consumer"))
            stream = self.streams[s["as"]] = await scenario.settle(opening)
            return {"consumer": stream.consumer, "window": stream.window}
        stream = self.streams[s["stream"]]
        ref = DeliveryRef(s.get("offset", 0), s.get("attempt", 0))
        if op == "stream_receive":
            wait_ms = s.get("wait_ms")
            try:
                return await scenario.settle(stream.receive(None if wait_ms is None else wait_ms / 1000))
            except TimeoutError:
                return None
        if op == "stream_ack":
            return await scenario.settle(stream.ack(ref))
        if op == "stream_touch":
            return await scenario.settle(stream.touch(ref))
        if op == "stream_nack":
            options = {k: s[k] for k in ("kind", "reason", "delay_ms") if k in s}
            return await scenario.settle(stream.nack(ref, **options))
        if op == "stream_answers":
            return [answer(settled) for settled in await scenario.settle(stream.flush(30))]
        await scenario.settle(stream.close())
        del self.streams[s["stream"]]
        return None
