"""Every endpoint written once, as a request plus how to read its answer.

The sync client and the asyncio client both run these, so the two cannot differ in what
they send or how they decode it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from . import models
from .errors import InvalidName, TransportError, Timeout, api_error
from .models import Ref

T = TypeVar("T")

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
    """``GET /healthz`` (503 is an answer here, not an error)."""
    return Call("GET", "/healthz", _as(models.Health), answers=(503,))


def metrics() -> Call[str]:
    """``GET /metrics``: Prometheus text."""
    return Call("GET", "/metrics", lambda response: response.text)


def openapi() -> Call[dict[str, Any]]:
    """``GET /openapi.json``."""
    return Call("GET", "/openapi.json", lambda response: response.json())


def create_topic(
    topic: str,
    retention: models.Retention | None,
    idempotency: models.IdempotencyWindow | None = None,
) -> Call[bool]:
    """``PUT /v1/topics/{topic}``: True if created."""
    body: dict[str, Any] = {} if retention is None else {"retention": retention.encode()}
    if idempotency is not None:
        body["idempotency"] = idempotency.encode()
    return Call("PUT", f"/v1/topics/{name('topic', topic)}", _field("created"), json=body)


def change_retention(topic: str, retention: models.Retention) -> Call[models.TopicInfo]:
    """``PATCH /v1/topics/{topic}``."""
    body = {"retention": retention.encode()}
    return Call("PATCH", f"/v1/topics/{name('topic', topic)}", _as(models.TopicInfo), json=body)


def list_topics() -> Call[list[models.TopicSummary]]:
    """``GET /v1/topics``."""
    return Call(
        "GET",
        "/v1/topics",
        lambda r: [models.from_json(models.TopicSummary, t) for t in r.json()["topics"]],
    )


def topic_info(topic: str) -> Call[models.TopicInfo]:
    """``GET /v1/topics/{topic}``."""
    return Call("GET", f"/v1/topics/{name('topic', topic)}", _as(models.TopicInfo))


def delete_topic(topic: str) -> Call[None]:
    """``DELETE /v1/topics/{topic}``."""
    return Call("DELETE", f"/v1/topics/{name('topic', topic)}", _ignore)


def publish(
    topic: str,
    payload: bytes | str,
    key: str | None = None,
    headers: dict[str, str] | None = None,
    idempotency_key: str | None = None,
) -> Call[models.Published]:
    """``POST /v1/topics/{topic}/messages``: the offset (metadata as request headers)."""
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


def publish_batch(
    topic: str, payloads: Sequence[bytes | str | models.Message]
) -> Call[models.BatchPublished]:
    """``POST /v1/topics/{topic}/messages/batch``: the offsets and the duplicates."""
    body = {"messages": [models.batch_message(p) for p in payloads]}
    path = f"/v1/topics/{name('topic', topic)}/messages/batch"
    return Call("POST", path, _as(models.BatchPublished), json=body)


def create_group(
    topic: str,
    group: str,
    max_attempts: int,
    start: str | int | None,
    lease_ms: int | None,
    backoff: models.Backoff | None,
    max_in_flight: int | None,
) -> Call[None]:
    """``PUT .../groups/{group}`` (409 ``group_exists`` if it exists)."""
    body: dict[str, Any] = {"max_attempts": max_attempts}
    optional = {"start": start, "lease_ms": lease_ms, "max_in_flight": max_in_flight}
    body.update({key: value for key, value in optional.items() if value is not None})
    if backoff is not None:
        body["backoff"] = backoff.encode()
    return Call("PUT", _group(topic, group), _ignore, json=body)


def group_info(topic: str, group: str) -> Call[models.GroupDetail]:
    """``GET .../groups/{group}``."""
    return Call("GET", _group(topic, group), _as(models.GroupDetail))


def delete_group(topic: str, group: str) -> Call[None]:
    """``DELETE .../groups/{group}``."""
    return Call("DELETE", _group(topic, group), _ignore)


def seek(topic: str, group: str, to: str | int) -> Call[models.GroupSeeked]:
    """``POST .../seek`` to an offset or ``"earliest"`` / ``"latest"``."""
    body: dict[str, Any] = {"offset": to} if isinstance(to, int) else {"to": to}
    return Call("POST", f"{_group(topic, group)}/seek", _as(models.GroupSeeked), json=body)


def pause(topic: str, group: str, until_ms: int | None) -> Call[models.GroupPause]:
    """``POST .../pause``, until a resume or until ``until_ms`` (Unix ms)."""
    body = {} if until_ms is None else {"until_ms": until_ms}
    return Call("POST", f"{_group(topic, group)}/pause", _as(models.GroupPause), json=body)


def resume(topic: str, group: str) -> Call[models.GroupPause]:
    """``POST .../resume``: ``changed`` is whether it was paused."""
    return Call("POST", f"{_group(topic, group)}/resume", _as(models.GroupPause))


def recover_topic(topic: str) -> Call[models.TopicRecovered]:
    """``POST /v1/topics/{topic}/recover``: reopens a failed topic now."""
    path = f"/v1/topics/{name('topic', topic)}/recover"
    return Call("POST", path, _as(models.TopicRecovered))


def repair_topic(topic: str) -> Call[models.TopicRepairReport]:
    """``POST /v1/topics/{topic}/repair``: moves damaged files aside and reopens."""
    path = f"/v1/topics/{name('topic', topic)}/repair"
    return Call("POST", path, _as(models.TopicRepairReport))


def _delivery_or_none(response: httpx.Response) -> models.Delivery | None:
    if response.status_code == 204:
        return None
    return models.from_json(models.Delivery, response.json())


def poll(topic: str, group: str, consumer: str | None) -> Call[models.Delivery | None]:
    """``POST .../poll``: a delivery, or None when nothing waits."""
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


def poll_raw(topic: str, group: str, consumer: str | None) -> Call[models.Delivery | None]:
    """``POST .../poll/raw``: the payload as the body, offset and attempt as headers."""
    body = {} if consumer is None else {"consumer": consumer}
    return Call("POST", f"{_group(topic, group)}/poll/raw", _raw_delivery, json=body)


def poll_batch(
    topic: str,
    group: str,
    max: int,
    consumer: str | None,
    wait_ms: int,
    ack: Sequence[Ref] | None,
) -> Call[models.PolledBatch]:
    """``POST .../poll/batch``, a long poll when ``wait_ms`` > 0, acking ``ack`` first."""
    body: dict[str, Any] = {"max": max, "wait_ms": wait_ms}
    if consumer is not None:
        body["consumer"] = consumer
    if ack is not None:
        body["ack"] = _refs(ack)
    path = f"{_group(topic, group)}/poll/batch"
    return Call("POST", path, _as(models.PolledBatch), json=body, wait_ms=wait_ms)


def ack(topic: str, group: str, delivery: Ref) -> Call[str]:
    """``POST .../ack``: ``"acked"`` (409 ``not_owned`` if not in flight)."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    return Call("POST", f"{_group(topic, group)}/ack", _field("outcome"), json=body)


def touch(topic: str, group: str, delivery: Ref) -> Call[str]:
    """``POST .../touch``: extends the lease; ``"touched"``."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    return Call("POST", f"{_group(topic, group)}/touch", _field("outcome"), json=body)


def _nack_options(kind: str | None, reason: str | None, delay_ms: int | None) -> dict[str, Any]:
    options = {"kind": kind, "reason": reason, "delay_ms": delay_ms}
    return {key: value for key, value in options.items() if value is not None}


def nack(
    topic: str,
    group: str,
    delivery: Ref,
    kind: str | None,
    reason: str | None,
    delay_ms: int | None,
) -> Call[str]:
    """``POST .../nack``: ``retry``, ``released`` or ``dead_lettered``."""
    body = {"offset": delivery.offset, "attempt": delivery.attempt}
    body.update(_nack_options(kind, reason, delay_ms))
    return Call("POST", f"{_group(topic, group)}/nack", _field("outcome"), json=body)


def _results(response: httpx.Response) -> list[models.ItemResult]:
    return [models.from_json(models.ItemResult, r) for r in response.json()["results"]]


def ack_batch(topic: str, group: str, deliveries: Sequence[Ref]) -> Call[list[models.ItemResult]]:
    """``POST .../ack/batch``: one result per delivery."""
    body = {"deliveries": _refs(deliveries)}
    return Call("POST", f"{_group(topic, group)}/ack/batch", _results, json=body)


def nack_batch(
    topic: str,
    group: str,
    deliveries: Sequence[Ref],
    kind: str | None,
    reason: str | None,
    delay_ms: int | None,
) -> Call[list[models.ItemResult]]:
    """``POST .../nack/batch``: one result per delivery."""
    body: dict[str, Any] = {"deliveries": _refs(deliveries)}
    body.update(_nack_options(kind, reason, delay_ms))
    return Call("POST", f"{_group(topic, group)}/nack/batch", _results, json=body)


def dead_letters(
    topic: str, group: str, start: int, limit: int | None
) -> Call[models.DeadLetterPage]:
    """``GET .../dead-letters``: one page from offset ``start``."""
    params: dict[str, Any] = {"from": start}
    if limit is not None:
        params["limit"] = limit
    path = f"{_group(topic, group)}/dead-letters"
    return Call("GET", path, _as(models.DeadLetterPage), params=params)


def _range(start: int | None, end: int | None) -> dict[str, int]:
    body = {"from": start, "to": end}
    return {key: value for key, value in body.items() if value is not None}


def redrive(topic: str, group: str, start: int | None, end: int | None) -> Call[int]:
    """``POST .../dead-letters/redrive``: how many were put back."""
    path = f"{_group(topic, group)}/dead-letters/redrive"
    return Call("POST", path, _field("count"), json=_range(start, end))


def purge(topic: str, group: str, start: int | None, end: int | None) -> Call[int]:
    """``POST .../dead-letters/purge``: how many were deleted."""
    path = f"{_group(topic, group)}/dead-letters/purge"
    return Call("POST", path, _field("count"), json=_range(start, end))


def create_channel(
    channel: str, max_subscribers: int | None, mailbox_capacity: int | None
) -> Call[bool]:
    """``PUT /v1/channels/{channel}``: True if created (409 if it exists otherwise)."""
    body = {"max_subscribers": max_subscribers, "mailbox_capacity": mailbox_capacity}
    body = {key: value for key, value in body.items() if value is not None}
    return Call(
        "PUT",
        f"/v1/channels/{name('channel', channel)}",
        lambda response: response.status_code == 201,
        json=body,
    )


def list_channels() -> Call[list[models.ChannelInfo]]:
    """``GET /v1/channels``."""
    return Call(
        "GET",
        "/v1/channels",
        lambda r: [models.from_json(models.ChannelInfo, c) for c in r.json()["channels"]],
    )


def channel_info(channel: str) -> Call[models.ChannelInfo]:
    """``GET /v1/channels/{channel}``."""
    return Call("GET", f"/v1/channels/{name('channel', channel)}", _as(models.ChannelInfo))


def close_channel(channel: str) -> Call[None]:
    """``DELETE /v1/channels/{channel}``: subscribers' streams end once drained."""
    return Call("DELETE", f"/v1/channels/{name('channel', channel)}", _ignore)


def publish_channel(channel: str, payload: bytes | str) -> Call[models.ChannelDelivery]:
    """``POST /v1/channels/{channel}/messages``."""
    content = payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)
    path = f"/v1/channels/{name('channel', channel)}/messages"
    return Call("POST", path, _as(models.ChannelDelivery), content=content)


def issue_ticket(path: str) -> Call[models.Ticket]:
    """``POST /v1/tickets``: a one-use ticket for a stream under ``path``."""
    return Call("POST", "/v1/tickets", _as(models.Ticket), json={"path": path})
