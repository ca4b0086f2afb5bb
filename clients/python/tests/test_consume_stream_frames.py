"""The consume stream loops, sync and asyncio, fed exact frame sequences by a stand-in
socket instead of a server: what a restarted server sends a loop that carried acks over
a kill -9, taken all at once (as from one read) before the loop runs again."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, cast

from websockets.exceptions import ConnectionClosed

from mailroom.aio_consume_stream import AsyncConsumeStream
from mailroom.aio_stream_consumer import AsyncStreamConsumer
from mailroom.consume_stream import ConsumeStream, Settlement
from mailroom.models import Delivery
from mailroom.stream_consumer import StreamConsumer

CARRIED = list(range(96, 112))
"""The offsets whose acks got no answer before the kill (attempt 1 each)."""


def restart_frames() -> list[str]:
    """The in-flight deliveries first, then the answers to the acks sent again (seq 0..15)."""
    deliveries = [
        {"type": "delivery", "offset": o, "attempt": 1, "payload": f"m{o}"} for o in CARRIED
    ]
    answers = [{"type": "settled", "seq": seq, "outcome": "acked"} for seq in range(len(CARRIED))]
    return [json.dumps(frame) for frame in deliveries + answers]


class FrameSocket:
    """A sync WebSocket stand-in: keeps what is sent; ``recv`` waits until closed."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._closed = threading.Event()

    def send(self, text: str) -> None:
        self.sent.append(json.loads(text))

    def recv(self, timeout: float | None = None) -> str:
        self._closed.wait(timeout)
        raise ConnectionClosed(None, None)

    def close(self) -> None:
        self._closed.set()


class AsyncFrameSocket:
    """The asyncio stand-in."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._closed = asyncio.Event()

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))

    async def recv(self) -> str:
        await self._closed.wait()
        raise ConnectionClosed(None, None)

    async def close(self) -> None:
        self._closed.set()


def test_the_stream_loop_never_hands_out_a_delivery_its_carried_ack_settled() -> None:
    socket = FrameSocket()
    stream = ConsumeStream(cast(Any, socket), "w1", 16)
    consumer = StreamConsumer(cast(Any, None), 16, 64, "w1", 1.0)
    consumer._stream, consumer._open = stream, True
    # What a reconnect does: the unanswered acks marked as sent again, and sent.
    consumer._tally.carried([Settlement("ack", o, 1) for o in CARRIED])
    for offset in CARRIED:
        consumer._send(Settlement("ack", offset, 1))
    assert [s["offset"] for s in socket.sent] == CARRIED
    frames = restart_frames()

    def receive(timeout: float | None = None) -> Delivery | None:
        # The loop is waiting for a delivery when all the frames are taken; once they
        # are used up, it ends instead of waiting for more.
        if frames:
            with stream._changed:
                for frame in frames:
                    stream._ledger.take(frame)
                frames.clear()
            stream.interrupt()
        delivery = ConsumeStream.receive(stream, timeout)
        if delivery is None:
            consumer._stop.set()
        return delivery

    stream.receive = receive  # type: ignore[method-assign]
    handed = [d.offset for d in iter(lambda: consumer._next(16), None)]
    assert handed == [], "a delivery settled by its carried ack was handed to the body"
    assert [(a.offset, a.outcome) for a in stream.answers()] == [(o, "acked") for o in CARRIED]
    assert (stream.buffered(), stream.unsettled(), stream.unanswered) == ([], [], 0)
    stream.close()


def test_the_async_stream_loop_never_hands_out_a_delivery_its_carried_ack_settled() -> None:
    async def main() -> tuple[list[int], AsyncConsumeStream]:
        socket = AsyncFrameSocket()
        stream = AsyncConsumeStream(cast(Any, socket), "w1", 16)
        consumer = AsyncStreamConsumer(cast(Any, None), 16, 64, "w1", 1.0)
        consumer._stream, consumer._open = stream, True
        consumer._tally.carried([Settlement("ack", o, 1) for o in CARRIED])
        for offset in CARRIED:
            await consumer._send(Settlement("ack", offset, 1))
        assert [s["offset"] for s in socket.sent] == CARRIED
        frames = restart_frames()

        async def receive(timeout: float | None = None) -> Delivery | None:
            if frames:  # no await in between: as from one read
                for frame in frames:
                    stream._ledger.take(frame)
                frames.clear()
                stream.interrupt()
            delivery = await AsyncConsumeStream.receive(stream, timeout)
            if delivery is None:
                consumer._stop.set()
            return delivery

        stream.receive = receive  # type: ignore[method-assign]
        handed = []
        while (delivery := await consumer._next(16)) is not None:
            handed.append(delivery.offset)
        await stream.close()
        return handed, stream

    handed, stream = asyncio.run(main())
    assert handed == [], "a delivery settled by its carried ack was handed to the body"
    assert [(a.offset, a.outcome) for a in stream.answers()] == [(o, "acked") for o in CARRIED]
    assert (stream.buffered(), stream.unsettled(), stream.unanswered) == ([], [], 0)
