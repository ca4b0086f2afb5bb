"""The synchronous client: one method per endpoint, over one pooled httpx connection set.

>>> from mailroom import Client
>>> client = Client("http://127.0.0.1:7070")          # doctest: +SKIP
>>> client.create_topic("orders")                     # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Literal, TypeVar, overload

import httpx

from . import _calls, models
from ._calls import Call
from ._endpoints import Endpoints, GroupEndpoints
from ._options import Timeouts, headers
from .consume_stream import ConsumeStream
from .consumer import Consumer
from .models import ItemResult
from .stream_consumer import StreamConsumer
from .streams import PublishStream, Subscription, sse_subscription, ws_subscription

T = TypeVar("T")


class Client(Endpoints):
    """A mailroom server at ``base_url`` (``http://HOST:PORT``), with an optional token.

    Every call is bounded by ``timeouts`` (5 s to connect, 30 s per call; a long poll's
    wait is added). Failures raise :mod:`mailroom.errors` types: the server's refusals as
    :class:`~mailroom.errors.ApiError` subclasses by code, a broken or silent connection as
    :class:`~mailroom.errors.TransportError`. The client is thread-safe. The methods
    that are one call each are :class:`~mailroom._endpoints.Endpoints`'.
    """

    _is_async: Literal[False] = False

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
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers(token),
            timeout=self.timeouts.for_wait(0),
        )

    def close(self) -> None:
        """Closes the pooled connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def run(self, call: Call[T]) -> T:
        """Sends one call and decodes its answer (or raises its typed error)."""
        try:
            response = self._http.request(
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

    def publish_stream(self, topic: str, window: int = 256) -> PublishStream:
        """A pipelined publish stream: up to ``window`` messages awaiting confirmation."""
        return PublishStream.open(self, topic, window)

    def group(self, topic: str, group: str) -> Group:
        """A handle on one consumer group (no request is made)."""
        return Group(self, topic, group)

    def consume_stream(
        self, topic: str, group: str, window: int = 1, consumer: str | None = None
    ) -> ConsumeStream:
        """A consume stream: deliveries pushed over one WebSocket, at most ``window``
        unsettled, settled on the same socket (see :mod:`mailroom.consume_stream`)."""
        return ConsumeStream.open(self, topic, group, window, consumer)

    def dead_letters(self, topic: str, group: str) -> Iterator[models.DeadLetter]:
        """Every dead letter, page after page."""
        start: int | None = 0
        while start is not None:
            page = self.dead_letters_page(topic, group, start)
            yield from page.dead_letters
            start = page.next

    def subscribe(self, channel: str, transport: str = "ws") -> Subscription:
        """Subscribes to a channel over ``"ws"`` or ``"sse"``: an iterator of payloads."""
        if transport == "sse":
            return sse_subscription(self, channel)
        return ws_subscription(self, channel)


class Group(GroupEndpoints):
    """One consumer group of a topic: its calls without the names, and the consumer loop."""

    def __init__(self, client: Client, topic: str, group: str) -> None:
        self.client = client
        self.topic = topic
        self.name = group

    def consume_stream(self, window: int = 1, *, consumer: str | None = None) -> ConsumeStream:
        """A consume stream of this group (see :meth:`Client.consume_stream`)."""
        return self.client.consume_stream(self.topic, self.name, window, consumer)

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
    ) -> Consumer: ...

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
    ) -> StreamConsumer: ...

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
    ) -> Consumer | StreamConsumer:
        """The consumer loop: ``for delivery in group.consume(batch=64): ...``.

        See :class:`~mailroom.consumer.Consumer` for how deliveries are acked, nacked and
        kept leased, and how it rides out a server restart. ``on_result`` sees every ack's
        result (``acked``, or ``not_owned`` for one whose lease ran out or that was applied
        before a lost answer). With ``stream=True`` the loop runs over the consume stream
        (:class:`~mailroom.stream_consumer.StreamConsumer`; ``window`` deliveries
        unsettled, by default the smaller of ``batch`` and the group's ``max_in_flight``).
        """
        if stream:
            return StreamConsumer(self, window, batch, consumer, retry_max_s, on_result)
        return Consumer(self, batch, consumer, wait_ms, retry_max_s, on_result)
