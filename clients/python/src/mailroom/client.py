"""The synchronous client: one method per endpoint, over one pooled httpx connection set.

>>> from mailroom import Client
>>> client = Client("http://127.0.0.1:7070")          # doctest: +SKIP
>>> client.create_topic("orders")                     # doctest: +SKIP
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, TypeVar, overload

import httpx

from . import _calls, models, reads
from ._calls import Call
from ._options import Timeouts, headers
from .consume_stream import ConsumeStream
from .consumer import Consumer
from .models import ItemResult, NackKind, Ref
from .stream_consumer import StreamConsumer
from .streams import PublishStream, Subscription, sse_subscription, ws_subscription

T = TypeVar("T")


class Client:
    """A mailroom server at ``base_url`` (``http://HOST:PORT``), with an optional token.

    Every call is bounded by ``timeouts`` (5 s to connect, 30 s per call; a long poll's
    wait is added). Failures raise :mod:`mailroom.errors` types: the server's refusals as
    :class:`~mailroom.errors.ApiError` subclasses by code, a broken or silent connection as
    :class:`~mailroom.errors.TransportError`. The client is thread-safe.
    """

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

    # Operations.

    def health(self) -> models.Health:
        """``/healthz``: ``ok``, or ``unhealthy`` with the reason."""
        return self.run(_calls.health())

    def metrics(self) -> str:
        """``/metrics`` as Prometheus text."""
        return self.run(_calls.metrics())

    def openapi(self) -> dict[str, Any]:
        """The server's OpenAPI document."""
        return self.run(_calls.openapi())

    def issue_ticket(self, path: str) -> models.Ticket:
        """A one-use ticket for a stream under ``path`` (for browsers)."""
        return self.run(_calls.issue_ticket(path))

    # Topics.

    def create_topic(
        self,
        topic: str,
        retention: models.Retention | None = None,
        idempotency: models.IdempotencyWindow | None = None,
    ) -> bool:
        """Creates a topic (idempotent): True if this call created it. ``idempotency``
        gives it an idempotency window of its own (set at creation only)."""
        return self.run(_calls.create_topic(topic, retention, idempotency))

    def change_retention(self, topic: str, retention: models.Retention) -> models.TopicInfo:
        """Changes the limits ``retention`` sets; the others stay."""
        return self.run(_calls.change_retention(topic, retention))

    def list_topics(self) -> list[models.TopicSummary]:
        """Every topic, by name."""
        return self.run(_calls.list_topics())

    def topic_info(self, topic: str) -> models.TopicInfo:
        """A topic's view."""
        return self.run(_calls.topic_info(topic))

    def delete_topic(self, topic: str) -> None:
        """Deletes a topic with its groups (404 ``unknown_topic`` if there is none)."""
        self.run(_calls.delete_topic(topic))

    def publish(
        self,
        topic: str,
        payload: bytes | str,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Publishes one message, with an optional key and headers; its offset once durable.

        With ``idempotency_key`` a retry is safe: a key in the topic's window is not
        stored again, and answers the first publish's offset (:meth:`publish_once` also
        says whether it was a duplicate).
        """
        call = _calls.publish(topic, payload, key, headers, idempotency_key)
        return (self.run(call)).offset

    def publish_once(
        self,
        topic: str,
        payload: bytes | str,
        idempotency_key: str,
        *,
        key: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> models.Published:
        """Publishes one message under ``idempotency_key``: its offset and ``duplicate``."""
        return self.run(_calls.publish(topic, payload, key, headers, idempotency_key))

    def publish_batch(
        self, topic: str, payloads: Sequence[bytes | str | models.Message]
    ) -> list[int]:
        """Publishes 1 to 10,000 messages in one write; their consecutive offsets.

        An item is a payload, or a :class:`~mailroom.models.Message` with metadata (and
        an idempotency key: a duplicate's offset is the first publish's).
        """
        return (self.run(_calls.publish_batch(topic, payloads))).offsets

    def publish_batch_once(
        self, topic: str, messages: Sequence[bytes | str | models.Message]
    ) -> models.BatchPublished:
        """As :meth:`publish_batch`, with the whole answer: offsets and ``duplicates``."""
        return self.run(_calls.publish_batch(topic, messages))

    def publish_stream(self, topic: str, window: int = 256) -> PublishStream:
        """A pipelined publish stream: up to ``window`` messages awaiting confirmation."""
        return PublishStream.open(self, topic, window)

    def recover_topic(self, topic: str) -> models.TopicRecovered:
        """Reopens a failed (unreadable or stopped) topic now."""
        return self.run(_calls.recover_topic(topic))

    def repair_topic(self, topic: str) -> models.TopicRepairReport:
        """Moves a damaged topic's bad files aside and reopens it."""
        return self.run(_calls.repair_topic(topic))

    # Groups.

    def group(self, topic: str, group: str) -> Group:
        """A handle on one consumer group (no request is made)."""
        return Group(self, topic, group)

    def create_group(
        self,
        topic: str,
        group: str,
        max_attempts: int,
        *,
        start: str | int | None = None,
        lease_ms: int | None = None,
        backoff: models.Backoff | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        """Creates a group (``start``: ``"earliest"``, ``"latest"`` or an offset)."""
        self.run(
            _calls.create_group(
                topic, group, max_attempts, start, lease_ms, backoff, max_in_flight
            )
        )

    def group_info(self, topic: str, group: str) -> models.GroupDetail:
        """A group's full view."""
        return self.run(_calls.group_info(topic, group))

    def delete_group(self, topic: str, group: str) -> None:
        """Deletes a group."""
        self.run(_calls.delete_group(topic, group))

    def seek(self, topic: str, group: str, to: str | int) -> models.GroupSeeked:
        """Moves a group to offset ``to``, or ``"earliest"`` / ``"latest"``.

        Deliveries in flight end (their acks become 409 ``not_owned``); a message seen
        before is delivered again with a higher attempt.
        """
        return self.run(_calls.seek(topic, group, to))

    def seek_to_time(self, topic: str, group: str, time_ms: int) -> models.GroupSeeked:
        """Moves a group to the first message published at or after ``time_ms`` (Unix ms)."""
        return self.run(reads.seek_to_time(topic, group, time_ms))

    def read(
        self,
        topic: str,
        *,
        from_offset: int | None = None,
        from_time_ms: int | None = None,
        limit: int | None = None,
        wait_ms: int = 0,
    ) -> reads.LogPage:
        """One page of the topic's log without a group (nothing moves); see :mod:`mailroom.reads`."""
        call = reads.read_messages(topic, from_offset, from_time_ms, limit, wait_ms)
        return self.run(call)

    def pause(
        self, topic: str, group: str, until_ms: int | None = None
    ) -> models.GroupPause:
        """Stops new deliveries until :meth:`resume` (or until ``until_ms``, Unix ms)."""
        return self.run(_calls.pause(topic, group, until_ms))

    def resume(self, topic: str, group: str) -> models.GroupPause:
        """Ends a pause; ``changed`` is whether the group was paused."""
        return self.run(_calls.resume(topic, group))

    def poll(self, topic: str, group: str, consumer: str | None = None) -> models.Delivery | None:
        """One delivery, or None; a consumer's repeated poll returns the same attempt."""
        return self.run(_calls.poll(topic, group, consumer))

    def poll_raw(
        self, topic: str, group: str, consumer: str | None = None
    ) -> models.Delivery | None:
        """As :meth:`poll`, with the payload sent raw (no base64 on the wire)."""
        return self.run(_calls.poll_raw(topic, group, consumer))

    def poll_batch(
        self,
        topic: str,
        group: str,
        max: int = 64,
        *,
        consumer: str | None = None,
        wait_ms: int = 0,
        ack: Sequence[Ref] | None = None,
    ) -> models.PolledBatch:
        """Up to ``max`` deliveries, waiting up to ``wait_ms``; acks ``ack`` first."""
        return self.run(_calls.poll_batch(topic, group, max, consumer, wait_ms, ack))

    def consume_stream(
        self, topic: str, group: str, window: int = 1, consumer: str | None = None
    ) -> ConsumeStream:
        """A consume stream: deliveries pushed over one WebSocket, at most ``window``
        unsettled, settled on the same socket (see :mod:`mailroom.consume_stream`)."""
        return ConsumeStream.open(self, topic, group, window, consumer)

    def ack(self, topic: str, group: str, delivery: Ref) -> str:
        """Acks a delivery: ``"acked"``, or :class:`~mailroom.errors.NotOwned`."""
        return self.run(_calls.ack(topic, group, delivery))

    def nack(
        self,
        topic: str,
        group: str,
        delivery: Ref,
        *,
        kind: NackKind | None = None,
        reason: str | None = None,
        delay_ms: int | None = None,
    ) -> str:
        """Nacks a delivery: ``"retry"``, ``"released"`` or ``"dead_lettered"``."""
        return self.run(_calls.nack(topic, group, delivery, kind, reason, delay_ms))

    def touch(self, topic: str, group: str, delivery: Ref) -> str:
        """Extends a delivery's lease: ``"touched"``."""
        return self.run(_calls.touch(topic, group, delivery))

    def ack_batch(
        self, topic: str, group: str, deliveries: Sequence[Ref]
    ) -> list[models.ItemResult]:
        """Acks many in order; each item succeeds or fails alone."""
        return self.run(_calls.ack_batch(topic, group, deliveries))

    def nack_batch(
        self,
        topic: str,
        group: str,
        deliveries: Sequence[Ref],
        *,
        kind: NackKind | None = None,
        reason: str | None = None,
        delay_ms: int | None = None,
    ) -> list[models.ItemResult]:
        """Nacks many in order with the same options; each item succeeds or fails alone."""
        return self.run(_calls.nack_batch(topic, group, deliveries, kind, reason, delay_ms))

    def dead_letters_page(
        self, topic: str, group: str, start: int = 0, limit: int | None = None
    ) -> models.DeadLetterPage:
        """One page of dead letters from offset ``start``."""
        return self.run(_calls.dead_letters(topic, group, start, limit))

    def dead_letters(self, topic: str, group: str) -> Iterator[models.DeadLetter]:
        """Every dead letter, page after page."""
        start: int | None = 0
        while start is not None:
            page = self.dead_letters_page(topic, group, start)
            yield from page.dead_letters
            start = page.next

    def redrive(
        self, topic: str, group: str, start: int | None = None, end: int | None = None
    ) -> int:
        """Puts dead letters in ``[start, end)`` back to this group; how many."""
        return self.run(_calls.redrive(topic, group, start, end))

    def purge(
        self, topic: str, group: str, start: int | None = None, end: int | None = None
    ) -> int:
        """Deletes dead letters in ``[start, end)``; how many."""
        return self.run(_calls.purge(topic, group, start, end))

    # Live channels.

    def create_channel(
        self,
        channel: str,
        *,
        max_subscribers: int | None = None,
        mailbox_capacity: int | None = None,
    ) -> bool:
        """Creates a channel (idempotent with the same settings): True if created."""
        return self.run(_calls.create_channel(channel, max_subscribers, mailbox_capacity))

    def list_channels(self) -> list[models.ChannelInfo]:
        """Every live channel."""
        return self.run(_calls.list_channels())

    def channel_info(self, channel: str) -> models.ChannelInfo:
        """A channel's settings and counters."""
        return self.run(_calls.channel_info(channel))

    def close_channel(self, channel: str) -> None:
        """Closes a channel; its subscribers' streams end once drained."""
        self.run(_calls.close_channel(channel))

    def publish_channel(self, channel: str, payload: bytes | str) -> models.ChannelDelivery:
        """Publishes to every subscriber's mailbox."""
        return self.run(_calls.publish_channel(channel, payload))

    def subscribe(self, channel: str, transport: str = "ws") -> Subscription:
        """Subscribes to a channel over ``"ws"`` or ``"sse"``: an iterator of payloads."""
        if transport == "sse":
            return sse_subscription(self, channel)
        return ws_subscription(self, channel)


class Group:
    """One consumer group of a topic: its calls without the names, and the consumer loop."""

    def __init__(self, client: Client, topic: str, group: str) -> None:
        self.client = client
        self.topic = topic
        self.name = group

    def info(self) -> models.GroupDetail:
        """The group's full view."""
        return self.client.group_info(self.topic, self.name)

    def poll(self, consumer: str | None = None) -> models.Delivery | None:
        """One delivery, or None."""
        return self.client.poll(self.topic, self.name, consumer)

    def poll_batch(self, max: int = 64, **options: Any) -> models.PolledBatch:
        """Up to ``max`` deliveries (see :meth:`Client.poll_batch`)."""
        return self.client.poll_batch(self.topic, self.name, max, **options)

    def ack(self, delivery: Ref) -> str:
        """Acks one delivery."""
        return self.client.ack(self.topic, self.name, delivery)

    def nack(self, delivery: Ref, **options: Any) -> str:
        """Nacks one delivery (see :meth:`Client.nack`)."""
        return self.client.nack(self.topic, self.name, delivery, **options)

    def touch(self, delivery: Ref) -> str:
        """Extends one delivery's lease."""
        return self.client.touch(self.topic, self.name, delivery)

    def seek(self, to: str | int) -> models.GroupSeeked:
        """Moves the group to offset ``to``, or ``"earliest"`` / ``"latest"`` (see :meth:`Client.seek`)."""
        return self.client.seek(self.topic, self.name, to)

    def pause(self, until_ms: int | None = None) -> models.GroupPause:
        """Stops new deliveries until :meth:`resume` (or until ``until_ms``, Unix ms)."""
        return self.client.pause(self.topic, self.name, until_ms)

    def resume(self) -> models.GroupPause:
        """Ends a pause; ``changed`` is whether the group was paused."""
        return self.client.resume(self.topic, self.name)

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
