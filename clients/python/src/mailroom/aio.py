"""The asyncio client: the same methods as :class:`mailroom.Client`, as coroutines.

>>> from mailroom import AsyncClient
>>> client = AsyncClient("http://127.0.0.1:7070")     # doctest: +SKIP
>>> await client.create_topic("orders")               # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Literal, TypeVar, overload

import httpx

from . import _calls, models
from ._calls import Call
from ._endpoints import Endpoints, GroupEndpoints
from ._options import Timeouts, headers
from .aio_consume_stream import AsyncConsumeStream
from .aio_consumer import AsyncConsumer
from .aio_stream_consumer import AsyncStreamConsumer
from .models import ItemResult
from .aio_streams import (
    AsyncPublishStream,
    AsyncSubscription,
    sse_subscription,
    ws_subscription,
)

T = TypeVar("T")


class AsyncClient(Endpoints):
    """A mailroom server at ``base_url`` (``http://HOST:PORT``), with an optional token.

    Every call is bounded by ``timeouts`` (5 s to connect, 30 s per call; a long poll's
    wait is added). Failures raise :mod:`mailroom.errors` types: the server's refusals as
    :class:`~mailroom.errors.ApiError` subclasses by code, a broken or silent connection as
    :class:`~mailroom.errors.TransportError`. The methods that are one call each are
    :class:`~mailroom._endpoints.Endpoints`', awaitable here.
    """

    _is_async: Literal[True] = True

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeouts = timeouts or Timeouts()
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers(token),
            timeout=self.timeouts.for_wait(0),
        )

    async def close(self) -> None:
        """Closes the pooled connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def run(self, call: Call[T]) -> T:
        """Sends one call and decodes its answer (or raises its typed error)."""
        try:
            response = await self._http.request(
                call.method,
                call.path,
                json=call.json,
                content=call.content,
                headers=call.headers,
                params=call.params,
                timeout=self.timeouts.for_wait(call.wait_ms),
            )
        except httpx.HTTPError as error:
            raise _calls.transport_error(error) from error
        _calls.raise_for(response, call.answers)
        return call.decode(response)

    async def publish_stream(self, topic: str, window: int = 256) -> AsyncPublishStream:
        """A pipelined publish stream: up to ``window`` messages awaiting confirmation."""
        return await AsyncPublishStream.open(self, topic, window)

    def group(self, topic: str, group: str) -> AsyncGroup:
        """A handle on one consumer group (no request is made)."""
        return AsyncGroup(self, topic, group)

    async def consume_stream(
        self, topic: str, group: str, window: int = 1, consumer: str | None = None
    ) -> AsyncConsumeStream:
        """A consume stream: deliveries pushed over one WebSocket, at most ``window``
        unsettled, settled on the same socket (see :mod:`mailroom.aio_consume_stream`)."""
        return await AsyncConsumeStream.open(self, topic, group, window, consumer)

    async def dead_letters(self, topic: str, group: str) -> AsyncIterator[models.DeadLetter]:
        """Every dead letter, page after page."""
        start: int | None = 0
        while start is not None:
            page = await self.dead_letters_page(topic, group, start)
            for dead_letter in page.dead_letters:
                yield dead_letter
            start = page.next

    async def subscribe(self, channel: str, transport: str = "ws") -> AsyncSubscription:
        """Subscribes to a channel over ``"ws"`` or ``"sse"``: an async iterator of payloads."""
        if transport == "sse":
            return await sse_subscription(self, channel)
        return await ws_subscription(self, channel)


class AsyncGroup(GroupEndpoints):
    """One consumer group of a topic: its calls without the names, and the consumer loop."""

    def __init__(self, client: AsyncClient, topic: str, group: str) -> None:
        self.client = client
        self.topic = topic
        self.name = group

    async def consume_stream(
        self, window: int = 1, *, consumer: str | None = None
    ) -> AsyncConsumeStream:
        """A consume stream of this group (see :meth:`AsyncClient.consume_stream`)."""
        return await self.client.consume_stream(self.topic, self.name, window, consumer)

    @overload
    def consume(
        self,
        batch: int = 64,
        *,
        consumer: str | None = None,
        wait_ms: int = 5000,
        retry_max_s: float = 2.0,
        on_result: Callable[[ItemResult], None] | None = None,
        stream: Literal[False] = False,
        window: None = None,
    ) -> AsyncConsumer: ...

    @overload
    def consume(
        self,
        batch: int = 64,
        *,
        consumer: str | None = None,
        wait_ms: int = 5000,
        retry_max_s: float = 2.0,
        on_result: Callable[[ItemResult], None] | None = None,
        stream: Literal[True],
        window: int | None = None,
    ) -> AsyncStreamConsumer: ...

    def consume(
        self,
        batch: int = 64,
        *,
        consumer: str | None = None,
        wait_ms: int = 5000,
        retry_max_s: float = 2.0,
        on_result: Callable[[ItemResult], None] | None = None,
        stream: bool = False,
        window: int | None = None,
    ) -> AsyncConsumer | AsyncStreamConsumer:
        """The consumer loop: ``async for delivery in group.consume(batch=64): ...``.

        See :class:`~mailroom.aio_consumer.AsyncConsumer` (it works as the sync one does);
        ``stream=True`` runs it over the consume stream
        (:class:`~mailroom.aio_stream_consumer.AsyncStreamConsumer`).
        """
        if stream:
            return AsyncStreamConsumer(self, window, batch, consumer, retry_max_s, on_result)
        return AsyncConsumer(self, batch, consumer, wait_ms, retry_max_s, on_result)
