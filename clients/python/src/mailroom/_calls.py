"""Every endpoint written once, as a request plus how to read its answer.

The sync client and the asyncio client both run these, so the two cannot differ in what
they send or how they decode it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast
from urllib.parse import quote

import httpx

from . import models
from .errors import InvalidName, TransportError, Timeout, api_error
from .models import NackKind, Ref

T = TypeVar("T")
U = TypeVar("U")

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def name(kind: str, value: str) -> str:
    """``value`` checked against the name rule (so no request is made with a bad one)."""
    if not _NAME.match(value) or value in (".", ".."):
        raise InvalidName(400, "invalid_name", f"{kind} name {value!r} breaks the name rule")
    return quote(value, safe="")


@dataclass
class Call(Generic[T]):
    """One HTTP request and the decoder of its successful answer."""

    method: str
    path: str
    decode: Callable[[httpx.Response], T]
    json: Any = None
    content: bytes | None = None
    params: dict[str, Any] | None = None
    wait_ms: int = 0
    headers: dict[str, str] | None = None
    answers: tuple[int, ...] = ()
    """Error statuses that are answers here (``/healthz``'s 503), decoded, not raised."""

    def then(self, pick: Callable[[T], U]) -> Call[U]:
        """The same request, its decoded answer passed through ``pick``."""
        decode = self.decode
        return dataclasses.replace(
            cast(Any, self), decode=lambda response: pick(decode(response))
        )


def _ignore(_: httpx.Response) -> None:
    return None


def _as(cls: type[T]) -> Callable[[httpx.Response], T]:
    return lambda response: models.from_json(cls, response.json())


def _field(key: str) -> Callable[[httpx.Response], Any]:
    return lambda response: response.json()[key]


def raise_for(response: httpx.Response, answers: tuple[int, ...] = ()) -> None:
    """Raises the typed error of an error answer."""
    if response.status_code < 400 or response.status_code in answers:
        return
    try:
        body = response.json()
        code, message = str(body["error"]), str(body.get("message", ""))
    except (ValueError, KeyError, TypeError):
        code, message = "error", response.text
    raise api_error(response.status_code, code, message)


def transport_error(error: httpx.HTTPError) -> Exception:
    """This package's error for an httpx failure."""
    if isinstance(error, httpx.TimeoutException):
        limit = {
            httpx.ConnectTimeout: "connect",
            httpx.ReadTimeout: "read",
            httpx.WriteTimeout: "write",
            httpx.PoolTimeout: "pool",
        }.get(type(error), "request")
        return Timeout(f"timed out ({limit}): {error}", limit)
    return TransportError(str(error) or type(error).__name__)


def _refs(deliveries: Iterable[Ref]) -> list[dict[str, int]]:
    return [{"offset": d.offset, "attempt": d.attempt} for d in deliveries]


def _group(topic: str, group: str) -> str:
    return f"/v1/topics/{name('topic', topic)}/groups/{name('group', group)}"


def group_path(topic: str, group: str) -> str:
    """The path of a group, its names checked and escaped."""
    return _group(topic, group)


def health() -> Call[models.Health]:
    """``/healthz``: ``ok``, or ``unhealthy`` with the reason (a 503 is an answer here)."""
    return Call("GET", "/healthz", _as(models.Health), answers=(503,))


def metrics() -> Call[str]:
    """``/metrics`` as Prometheus text."""
    return Call("GET", "/metrics", lambda response: response.text)


def openapi() -> Call[dict[str, Any]]:
    """The server's OpenAPI document."""
    return Call("GET", "/openapi.json", lambda response: response.json())


def create_topic(
    topic: str,
    retention: models.Retention | None = None,
    idempotency: models.IdempotencyWindow | None = None,
) -> Call[bool]:
    """Creates a topic (idempotent): True if this call created it. ``idempotency``
    gives it an idempotency window of its own (set at creation only)."""
    body: dict[str, Any] = {} if retention is None else {"retention": retention.encode()}
    if idempotency is not None:
        body["idempotency"] = idempotency.encode()
    return Call("PUT", f"/v1/topics/{name('topic', topic)}", _field("created"), json=body)


def change_retention(topic: str, retention: models.Retention) -> Call[models.TopicInfo]:
    """Changes the limits ``retention`` sets; the others stay."""
    body = {"retention": retention.encode()}
    return Call("PATCH", f"/v1/topics/{name('topic', topic)}", _as(models.TopicInfo), json=body)


def list_topics() -> Call[list[models.TopicSummary]]:
    """Every topic, by name."""
    return Call(
        "GET",
        "/v1/topics",
        lambda r: [models.from_json(models.TopicSummary, t) for t in r.json()["topics"]],
    )


def topic_info(topic: str) -> Call[models.TopicInfo]:
    """A topic's view."""
    return Call("GET", f"/v1/topics/{name('topic', topic)}", _as(models.TopicInfo))


def delete_topic(topic: str) -> Call[None]:
    """Deletes a topic with its groups (404 ``unknown_topic`` if there is none)."""
    return Call("DELETE", f"/v1/topics/{name('topic', topic)}", _ignore)


def publish(
    topic: str,
    payload: bytes | str,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    idempotency_key: str | None = None,
) -> Call[int]:
    """Publishes one message, with an optional key and headers; its offset once durable.

    With ``idempotency_key`` a retry is safe: a key in the topic's window is not
    stored again, and answers the first publish's offset (:meth:`publish_once` also
    says whether it was a duplicate).
    """
    return _publish(topic, payload, key, headers, idempotency_key).then(lambda p: p.offset)


def publish_once(
    topic: str,
    payload: bytes | str,
    idempotency_key: str,
    *,
    key: str | None = None,
    headers: dict[str, str] | None = None,
) -> Call[models.Published]:
    """Publishes one message under ``idempotency_key``: its offset and ``duplicate``."""
    return _publish(topic, payload, key, headers, idempotency_key)


def _publish(
    topic: str,
    payload: bytes | str,
    key: str | None,
    headers: dict[str, str] | None,
    idempotency_key: str | None,
) -> Call[models.Published]:
    """``POST /v1/topics/{topic}/messages`` (the metadata as request headers)."""
    content = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    path = f"/v1/topics/{name('topic', topic)}/messages"
    sent: dict[str, str] = {}
    if key is not None:
        sent["mailroom-key"] = key
    for header, value in (headers or {}).items():
        sent[f"mailroom-header-{header}"] = value
    if idempotency_key is not None:
        sent["Idempotency-Key"] = idempotency_key
    return Call("POST", path, _as(models.Published), content=content, headers=sent or None)


def publish_batch(topic: str, payloads: Sequence[bytes | str | models.Message]) -> Call[list[int]]:
    """Publishes 1 to 10,000 messages in one write; their consecutive offsets.

    An item is a payload, or a :class:`~mailroom.models.Message` with metadata (and
    an idempotency key: a duplicate's offset is the first publish's).
    """
    return publish_batch_once(topic, payloads).then(lambda batch: batch.offsets)


def publish_batch_once(
    topic: str, messages: Sequence[bytes | str | models.Message]
) -> Call[models.BatchPublished]:
    """As :meth:`publish_batch`, with the whole answer: offsets and ``duplicates``."""
    body = {"messages": [models.batch_message(m) for m in messages]}
    path = f"/v1/topics/{name('topic', topic)}/messages/batch"
    return Call("POST", path, _as(models.BatchPublished), json=body)


def create_group(
    topic: str,
    group: str,
    max_attempts: int,
    *,
    start: str | int | None = None,
    lease_ms: int | None = None,
    backoff: models.Backoff | None = None,
    max_in_flight: int | None = None,
) -> Call[None]:
    """Creates a group (``start``: ``"earliest"``, ``"latest"`` or an offset; 409
    ``group_exists`` if it exists)."""
    body: dict[str, Any] = {"max_attempts": max_attempts}
    optional = {"start": start, "lease_ms": lease_ms, "max_in_flight": max_in_flight}
    body.update({key: value for key, value in optional.items() if value is not None})
    if backoff is not None:
        body["backoff"] = backoff.encode()
    return Call("PUT", _group(topic, group), _ignore, json=body)


def group_info(topic: str, group: str) -> Call[models.GroupDetail]:
    """A group's full view."""
    return Call("GET", _group(topic, group), _as(models.GroupDetail))


def delete_group(topic: str, group: str) -> Call[None]:
    """Deletes a group."""
    return Call("DELETE", _group(topic, group), _ignore)


def seek(topic: str, group: str, to: str | int) -> Call[models.GroupSeeked]:
    """Moves a group to offset ``to``, or ``"earliest"`` / ``"latest"``.

    Deliveries in flight end (their acks become 409 ``not_owned``); a message seen
    before is delivered again with a higher attempt.
    """
    body: dict[str, Any] = {"offset": to} if isinstance(to, int) else {"to": to}
    return Call("POST", f"{_group(topic, group)}/seek", _as(models.GroupSeeked), json=body)


def pause(topic: str, group: str, until_ms: int | None = None) -> Call[models.GroupPause]:
    """Stops new deliveries until :meth:`resume` (or until ``until_ms``, Unix ms)."""
    body = {} if until_ms is None else {"until_ms": until_ms}
    return Call("POST", f"{_group(topic, group)}/pause", _as(models.GroupPause), json=body)


def resume(topic: str, group: str) -> Call[models.GroupPause]:
    """Ends a pause; ``changed`` is whether the group was paused."""
    return Call("POST", f"{_group(topic, group)}/resume", _as(models.GroupPause))


def recover_topic(topic: str) -> Call[models.TopicRecovered]:
    """Reopens a failed (unreadable or stopped) topic now."""
    path = f"/v1/topics/{name('topic', topic)}/recover"
    return Call("POST", path, _as(models.TopicRecovered))


def repair_topic(topic: str) -> Call[models.TopicRepairReport]:
    """Moves a damaged topic's bad files aside and reopens it."""
    path = f"/v1/topics/{name('topic', topic)}/repair"
    return Call("POST", path, _as(models.TopicRepairReport))


def _delivery_or_none(response: httpx.Response) -> models.Delivery | None:
    if response.status_code == 204:
        return None
    return models.from_json(models.Delivery, response.json())


def poll(topic: str, group: str, consumer: str | None = None) -> Call[models.Delivery | None]:
    """One delivery, or None; a consumer's repeated poll returns the same attempt."""
    body = {} if consumer is None else {"consumer": consumer}
    return Call("POST", f"{_group(topic, group)}/poll", _delivery_or_none, json=body)


def _raw_delivery(response: httpx.Response) -> models.Delivery | None:
    if response.status_code == 204:
        return None
    sent = response.headers
    offset = int(sent["mailroom-offset"])
    attempt = int(sent["mailroom-attempt"])
    prefix = "mailroom-header-"
    headers = {k[len(prefix) :]: v for k, v in sent.items() if k.startswith(prefix)}
    published = sent.get("mailroom-published-at-ms")
    return models.Delivery(
        offset,
        attempt,
        response.content,
        key=sent.get("mailroom-key"),
        headers=headers or None,
        published_at_ms=None if published is None else int(published),
    )


def poll_raw(
    topic: str, group: str, consumer: str | None = None
) -> Call[models.Delivery | None]:
    """As :meth:`poll`, with the payload sent raw (no base64 on the wire: offset and
    attempt as headers)."""
    body = {} if consumer is None else {"consumer": consumer}
    return Call("POST", f"{_group(topic, group)}/poll/raw", _raw_delivery, json=body)


def poll_batch(
    topic: str,
    group: str,
    max: int = 64,
    *,
    consumer: str | None = None,
    wait_ms: int = 0,
    ack: Sequence[Ref] | None = None,
    nack: Sequence[Ref] | None = None,
    nack_kind: NackKind | None = None,
    nack_reason: str | None = None,
    nack_delay_ms: int | None = None,
) -> Call[models.PolledBatch]:
    """Up to ``max`` deliveries, waiting up to ``wait_ms``; first nacks ``nack`` (with the
    ``nack_*`` options), then acks ``ack``, in the same request and transaction. An empty
    ``nack`` nacks nothing and is left out of the body, as the Rust client does."""
    body: dict[str, Any] = {"max": max, "wait_ms": wait_ms}
    if consumer is not None:
        body["consumer"] = consumer
    if ack is not None:
        body["ack"] = _refs(ack)
    if nack:
        options = _nack_options(nack_kind, nack_reason, nack_delay_ms)
        body["nack"] = {"deliveries": _refs(nack), **options}
    path = f"{_group(topic, group)}/poll/batch"
    return Call("POST", path, _as(models.PolledBatch), json=body, wait_ms=wait_ms)


def ack(topic: str, group: str, delivery: Ref) -> Call[str]:
    """Acks a delivery: ``"acked"``, or :class:`~mailroom.errors.NotOwned`."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    return Call("POST", f"{_group(topic, group)}/ack", _field("outcome"), json=body)


def touch(topic: str, group: str, delivery: Ref) -> Call[str]:
    """Extends a delivery's lease: ``"touched"``."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    return Call("POST", f"{_group(topic, group)}/touch", _field("outcome"), json=body)


def _nack_options(kind: NackKind | None, reason: str | None, delay_ms: int | None) -> dict[str, Any]:
    options = {"kind": kind, "reason": reason, "delay_ms": delay_ms}
    return {key: value for key, value in options.items() if value is not None}


def nack(
    topic: str,
    group: str,
    delivery: Ref,
    *,
    kind: NackKind | None = None,
    reason: str | None = None,
    delay_ms: int | None = None,
) -> Call[str]:
    """Nacks a delivery: ``"retry"``, ``"released"`` or ``"dead_lettered"``."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    body.update(_nack_options(kind, reason, delay_ms))
    return Call("POST", f"{_group(topic, group)}/nack", _field("outcome"), json=body)


def _results(response: httpx.Response) -> list[models.ItemResult]:
    return [models.from_json(models.ItemResult, r) for r in response.json()["results"]]


def ack_batch(topic: str, group: str, deliveries: Sequence[Ref]) -> Call[list[models.ItemResult]]:
    """Acks many in order; each item succeeds or fails alone."""
    body = {"deliveries": _refs(deliveries)}
    return Call("POST", f"{_group(topic, group)}/ack/batch", _results, json=body)


def nack_batch(
    topic: str,
    group: str,
    deliveries: Sequence[Ref],
    *,
    kind: NackKind | None = None,
    reason: str | None = None,
    delay_ms: int | None = None,
) -> Call[list[models.ItemResult]]:
    """Nacks many in order with the same options; each item succeeds or fails alone."""
    body: dict[str, Any] = {"deliveries": _refs(deliveries)}
    body.update(_nack_options(kind, reason, delay_ms))
    return Call("POST", f"{_group(topic, group)}/nack/batch", _results, json=body)


def dead_letters_page(
    topic: str, group: str, start: int = 0, limit: int | None = None
) -> Call[models.DeadLetterPage]:
    """One page of dead letters from offset ``start``."""
    params: dict[str, Any] = {"from": start}
    if limit is not None:
        params["limit"] = limit
    path = f"{_group(topic, group)}/dead-letters"
    return Call("GET", path, _as(models.DeadLetterPage), params=params)


def _range(start: int | None, end: int | None) -> dict[str, int]:
    body = {"from": start, "to": end}
    return {key: value for key, value in body.items() if value is not None}


def redrive(
    topic: str, group: str, start: int | None = None, end: int | None = None
) -> Call[int]:
    """Puts dead letters in ``[start, end)`` back to this group; how many."""
    path = f"{_group(topic, group)}/dead-letters/redrive"
    return Call("POST", path, _field("count"), json=_range(start, end))


def purge(
    topic: str, group: str, start: int | None = None, end: int | None = None
) -> Call[int]:
    """Deletes dead letters in ``[start, end)``; how many."""
    path = f"{_group(topic, group)}/dead-letters/purge"
    return Call("POST", path, _field("count"), json=_range(start, end))


def create_channel(
    channel: str, *, max_subscribers: int | None = None, mailbox_capacity: int | None = None
) -> Call[bool]:
    """Creates a channel (idempotent with the same settings): True if created (409 if
    it exists with other settings)."""
    body = {"max_subscribers": max_subscribers, "mailbox_capacity": mailbox_capacity}
    body = {key: value for key, value in body.items() if value is not None}
    return Call(
        "PUT",
        f"/v1/channels/{name('channel', channel)}",
        lambda response: response.status_code == 201,
        json=body,
    )


def list_channels() -> Call[list[models.ChannelInfo]]:
    """Every live channel."""
    return Call(
        "GET",
        "/v1/channels",
        lambda r: [models.from_json(models.ChannelInfo, c) for c in r.json()["channels"]],
    )


def channel_info(channel: str) -> Call[models.ChannelInfo]:
    """A channel's settings and counters."""
    return Call("GET", f"/v1/channels/{name('channel', channel)}", _as(models.ChannelInfo))


def close_channel(channel: str) -> Call[None]:
    """Closes a channel; its subscribers' streams end once drained."""
    return Call("DELETE", f"/v1/channels/{name('channel', channel)}", _ignore)


def publish_channel(channel: str, payload: bytes | str) -> Call[models.ChannelDelivery]:
    """Publishes to every subscriber's mailbox."""
    content = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    path = f"/v1/channels/{name('channel', channel)}/messages"
    return Call("POST", path, _as(models.ChannelDelivery), content=content)


def issue_ticket(path: str) -> Call[models.Ticket]:
    """A one-use ticket for a stream under ``path`` (for browsers)."""
    return Call("POST", "/v1/tickets", _as(models.Ticket), json={"path": path})
