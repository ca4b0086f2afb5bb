"""The I/O shells the consumer loops share: :class:`SyncShell` (threads and blocking
calls) for :class:`~mailroom.Consumer` and :class:`~mailroom.StreamConsumer`,
:class:`AsyncShell` (tasks and awaits) for their asyncio twins.

A shell runs what every loop does the same way around its book (the decisions without
I/O, :mod:`mailroom._loop`): ``run(handler)``, leaving a ``with`` block, releasing what
the loop leaves unhandled, nacking over HTTP, and trying calls again while the server is
unreachable. Each loop adds how it consumes (long polls, or the consume stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ._loop import Book, Retry
from .errors import MailroomError, NotOwned
from .models import Delivery

if TYPE_CHECKING:
    from .aio import AsyncGroup
    from .client import Group

T = TypeVar("T")
B = TypeVar("B", bound=Book)
S = TypeVar("S", bound="SyncShell[Any]")
A = TypeVar("A", bound="AsyncShell[Any]")


class Stopped(Exception):
    """Raised inside a loop once ``stop`` was called while it was retrying."""


class SyncShell(Generic[B]):
    """What the sync loops share; a loop defines ``fail`` and ``_loop``."""

    def __init__(self, group: Group, retry_max_s: float, book: B) -> None:
        self.group = group
        self.retry_max_s = retry_max_s
        self.stats = book.stats
        self._book = book
        self._stop = threading.Event()
        self._gen: Generator[Delivery, None, None] | None = None

    def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        raise NotImplementedError

    def _loop(self) -> Iterator[Delivery]:
        raise NotImplementedError

    def __enter__(self: S) -> S:
        self._book.in_context = True
        return self

    def __exit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
            self._gen.close()  # settles now what a `break` or an exception left behind
        failed, left = self._book.exiting(error)
        if failed is not None and error is not None:
            self.fail(failed, error)
        self._release(left)

    def run(self, handler: Callable[[Delivery], Any]) -> None:
        """Calls ``handler`` on every delivery until ``stop``: ack on return, nack on raise."""
        for delivery in self:
            try:
                handler(delivery)
            except Exception as error:  # noqa: BLE001 - any failure of the handler is a nack
                self.fail(delivery, error)

    def __iter__(self) -> Iterator[Delivery]:
        self._gen = self._iterate()
        return self._gen

    def _iterate(self) -> Generator[Delivery, None, None]:
        try:
            yield from self._loop()
        except Stopped:
            return

    def _nack(self, delivery: Delivery, reason: str, leaving: bool) -> None:
        """Nacks ``delivery`` over HTTP and counts the answer."""
        try:
            self._retrying(lambda: self.group.nack(delivery, reason=reason), leaving)
            self._book.nacked(refused=False)
        except NotOwned:
            self._book.nacked(refused=True)

    def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            self._retrying(
                lambda: client.nack_batch(topic, name, deliveries, kind="release"), leaving=True
            )
            self._book.released(len(deliveries))
        except MailroomError:
            pass  # their leases (or this consumer's next poll or stream) hand them out again

    def _retrying(self, call: Callable[[], T], leaving: bool = False) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        retry = Retry(self.stats, self.retry_max_s, leaving)
        while True:
            try:
                return call()
            except MailroomError as error:
                pause = retry.after(error)
                if pause is None:
                    raise
                if retry.stops(self._stop.wait(pause)):
                    raise Stopped() from error


class AsyncShell(Generic[B]):
    """What the asyncio loops share; a loop defines ``fail`` and ``_iterate`` (whole, so
    that closing the loop's generator reaches the code that settles what it left)."""

    def __init__(self, group: AsyncGroup, retry_max_s: float, book: B) -> None:
        self.group = group
        self.retry_max_s = retry_max_s
        self.stats = book.stats
        self._book = book
        self._stop = asyncio.Event()
        self._gen: AsyncGenerator[Delivery, None] | None = None

    async def fail(self, delivery: Delivery, error: BaseException | str) -> None:
        """Nacks ``delivery`` with ``error`` as the reason (it is not acked later)."""
        raise NotImplementedError

    def _iterate(self) -> AsyncGenerator[Delivery, None]:
        raise NotImplementedError

    async def __aenter__(self: A) -> A:
        self._book.in_context = True
        return self

    async def __aexit__(self, kind: Any, error: BaseException | None, _tb: Any) -> None:
        if self._gen is not None:
            # An exception that left `async for` has not closed the generator yet.
            await self._gen.aclose()
        failed, left = self._book.exiting(error)
        if failed is not None and error is not None:
            await self.fail(failed, error)
        await self._release(left)

    async def run(self, handler: Callable[[Delivery], Awaitable[Any]]) -> None:
        """Awaits ``handler`` on every delivery until ``stop``: ack on return, nack on raise."""
        async for delivery in self:
            try:
                await handler(delivery)
            except Exception as error:  # noqa: BLE001 - any failure of the handler is a nack
                await self.fail(delivery, error)

    def __aiter__(self) -> AsyncGenerator[Delivery, None]:
        self._gen = self._iterate()
        return self._gen

    async def _nack(self, delivery: Delivery, reason: str, leaving: bool) -> None:
        """Nacks ``delivery`` over HTTP and counts the answer."""
        try:
            await self._retrying(lambda: self.group.nack(delivery, reason=reason), leaving)
            self._book.nacked(refused=False)
        except NotOwned:
            self._book.nacked(refused=True)

    async def _release(self, deliveries: list[Delivery]) -> None:
        if not deliveries:
            return
        client, topic, name = self.group.client, self.group.topic, self.group.name
        try:
            await self._retrying(
                lambda: client.nack_batch(topic, name, deliveries, kind="release"), leaving=True
            )
            self._book.released(len(deliveries))
        except MailroomError:
            pass  # their leases (or this consumer's next poll or stream) hand them out again

    async def _retrying(self, call: Callable[[], Awaitable[T]], leaving: bool = False) -> T:
        """``call``, tried again with a doubling pause while the server is unreachable."""
        retry = Retry(self.stats, self.retry_max_s, leaving)
        while True:
            try:
                return await call()
            except MailroomError as error:
                pause = retry.after(error)
                if pause is None:
                    raise
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), pause)
                if retry.stops(self._stop.is_set()):
                    raise Stopped() from error
