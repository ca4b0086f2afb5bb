"""The asyncio consume stream: as :mod:`mailroom.consume_stream`, with a reader task.

    async with await client.consume_stream("orders", "billing", window=16) as stream:
        async for delivery in stream:
            await handle(delivery)
            await stream.ack(delivery)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from .aio_streams import open_ws
from .consume_stream import Ledger, Settlement, close_reason, opened, stream_path
from .errors import MailroomError, TransportError
from .models import Delivery, NackKind, Ref, Settled

if TYPE_CHECKING:
    from .aio import AsyncClient


class AsyncConsumeStream:
    """A group's deliveries over one WebSocket, settled on it (see :mod:`mailroom.consume_stream`)."""

    def __init__(self, socket: ClientConnection, consumer: str, window: int) -> None:
        self._socket = socket
        self.consumer = consumer
        """The consumer identity the deliveries are owned by (the server's if none was given)."""
        self.window = window
        """The most deliveries unsettled at once."""
        self._ledger = Ledger()
        self._changed = asyncio.Event()
        self._sending = asyncio.Lock()
        self._interrupted = False
        self._reader = asyncio.ensure_future(self._read())

    @classmethod
    async def open(
        cls,
        client: AsyncClient,
        topic: str,
        group: str,
        window: int = 1,
        consumer: str | None = None,
    ) -> AsyncConsumeStream:
        """Opens the stream (404 ``unknown_group``, 400 for a window the group cannot fill)."""
        socket = await open_ws(client, stream_path(topic, group, window, consumer))
        try:
            first = await asyncio.wait_for(socket.recv(), client.timeouts.request)
            identity, granted = opened(first)
        except (ConnectionClosed, asyncio.TimeoutError) as error:
            await socket.close()
            raise TransportError(f"consume stream of {topic}/{group} did not open: {error}") from error
        return cls(socket, identity, granted)

    @property
    def closed(self) -> str | None:
        """Why the stream ended, once it did."""
        return self._ledger.closed

    @property
    def unanswered(self) -> int:
        """Settlements sent and not answered yet."""
        return len(self._ledger.pending)

    def unsettled(self) -> list[Delivery]:
        """Deliveries received and not acked or nacked (their leases are running)."""
        return list(self._ledger.unsettled.values())

    def pending(self) -> list[Settlement]:
        """Settlements sent (or tried) and not answered, in order."""
        return list(self._ledger.pending)

    def buffered(self) -> list[Delivery]:
        """Deliveries received and not handed out yet."""
        return list(self._ledger.deliveries)

    async def _wait(self, ready: Callable[[], object], timeout: float | None) -> bool:
        """Waits until ``ready()`` holds; False on timeout."""

        async def until() -> None:
            while not ready():
                self._changed.clear()
                await self._changed.wait()
        try:
            await asyncio.wait_for(until(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def receive(self, timeout: float | None = None) -> Delivery | None:
        """The next delivery; None once the stream closed (or after :meth:`interrupt`).
        Raises :class:`TimeoutError` after ``timeout`` seconds."""
        ledger = self._ledger
        ready = await self._wait(
            lambda: ledger.deliveries or ledger.closed or self._interrupted, timeout
        )
        if ledger.failure is not None:
            raise ledger.failure
        if ledger.deliveries:
            return ledger.deliveries.popleft()
        if not ready:
            raise TimeoutError(f"no delivery within {timeout}s")
        self._interrupted = False
        return None

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self._deliveries()

    async def _deliveries(self) -> AsyncIterator[Delivery]:
        while (delivery := await self.receive()) is not None:
            yield delivery

    def interrupt(self) -> None:
        """Makes the waiting (or the next) :meth:`receive` return None without closing."""
        self._interrupted = True
        self._changed.set()

    async def ack(self, delivery: Ref) -> int:
        """Acks ``delivery``; the settlement's ``seq``."""
        return await self.send(Settlement("ack", delivery.offset, delivery.attempt))

    async def nack(
        self,
        delivery: Ref,
        *,
        kind: NackKind | None = None,
        reason: str | None = None,
        delay_ms: int | None = None,
    ) -> int:
        """Nacks, releases or rejects ``delivery``; the ``seq``."""
        settlement = Settlement("nack", delivery.offset, delivery.attempt, kind, reason, delay_ms)
        return await self.send(settlement)

    async def touch(self, delivery: Ref) -> int:
        """Extends the lease of ``delivery``; the ``seq``."""
        return await self.send(Settlement("touch", delivery.offset, delivery.attempt))

    async def send(self, settlement: Settlement) -> int:
        """Sends one settlement; its ``seq`` (frames go out in ``seq`` order)."""
        async with self._sending:
            if self._ledger.closed is not None:
                self._ledger.pending.append(settlement)
                raise self._ledger.closed_error()
            seq = self._ledger.settle(settlement)
            try:
                await self._socket.send(settlement.frame())
            except ConnectionClosed as closed:
                self._closed(close_reason(closed))
                raise self._ledger.closed_error() from closed
        return seq

    def answers(self) -> list[Settled]:
        """The answers that arrived and were not taken yet, in ``seq`` order."""
        taken = list(self._ledger.answers)
        self._ledger.answers.clear()
        return taken

    async def flush(self, timeout: float | None = None) -> list[Settled]:
        """Waits until every settlement sent is answered; the answers not taken yet
        (:class:`~mailroom.errors.StreamClosed` if the stream closes first)."""
        ledger = self._ledger
        done = await self._wait(lambda: not ledger.pending or ledger.closed, timeout)
        if ledger.pending:
            if not done:
                raise TimeoutError(f"{len(ledger.pending)} settlements unanswered")
            raise ledger.closed_error()
        return self.answers()

    async def close(self) -> None:
        """Closes the connection; deliveries not settled stay in flight."""
        await self._socket.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader

    async def __aenter__(self) -> AsyncConsumeStream:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _read(self) -> None:
        """The reader task: every frame into the ledger, until the stream ends."""
        while True:
            try:
                text = await self._socket.recv()
            except ConnectionClosed as closed:
                self._closed(close_reason(closed))
                return
            try:
                self._ledger.take(text)
            except (MailroomError, ValueError, KeyError, TypeError) as error:
                failure = error if isinstance(error, MailroomError) else None
                self._ledger.failure = failure or TransportError(f"bad frame: {error}")
                self._closed("bad frame")
                await self._socket.close()
                return
            self._changed.set()

    def _closed(self, reason: str) -> None:
        if self._ledger.closed is None:
            self._ledger.closed = reason
        self._changed.set()
