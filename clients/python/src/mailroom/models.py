"""The bodies of the API as dataclasses, decoded from and encoded to the wire's JSON.

Payloads are ``bytes``: the wire carries them as ``payload`` (UTF-8 text) or
``payload_base64``, and the client hides which. Fields a newer server adds are ignored
when decoding, so an older client keeps working; fields that are optional on the wire are
optional here (``None`` when absent), which is also how new ones get added.
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, Union

NackKind = Literal["nack", "release", "reject"]
"""How a nack ends a delivery: a failure, a hand-back (not a failure), or dead-letter now."""


class Ref(Protocol):
    """Anything that names a delivery: a :class:`Delivery` or a :class:`DeliveryRef`."""

    @property
    def offset(self) -> int: ...  # noqa: D102

    @property
    def attempt(self) -> int: ...  # noqa: D102


def decode_payload(body: dict[str, Any]) -> bytes:
    """The payload of a delivery or dead letter, whichever way the wire carried it."""
    if body.get("payload") is not None:
        return str(body["payload"]).encode("utf-8")
    if body.get("payload_base64") is not None:
        return base64.b64decode(body["payload_base64"])
    return b""


@dataclass
class Message:
    """A message to publish with its metadata: a ``key`` and ``headers`` (both optional)."""

    payload: bytes | str
    key: str | None = None
    headers: dict[str, str] | None = None
    idempotency_key: str | None = None
    """1 to 256 bytes: a message repeating a key in the topic's window is not stored again."""

    def encode(self) -> dict[str, Any]:
        """The wire form: ``payload`` when UTF-8, ``payload_base64`` otherwise."""
        body: dict[str, Any] = {}
        text = batch_message(self.payload)
        if isinstance(text, str):
            body["payload"] = text
        else:
            body["payload_base64"] = text["base64"]
        if self.key is not None:
            body["key"] = self.key
        if self.headers is not None:
            body["headers"] = dict(self.headers)
        if self.idempotency_key is not None:
            body["idempotency_key"] = self.idempotency_key
        return body


def batch_message(payload: bytes | str | Message) -> Any:
    """One message of a batch publish: text when it is UTF-8, ``{"base64"}`` otherwise."""
    if isinstance(payload, Message):
        return payload.encode()
    if isinstance(payload, str):
        return payload
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(payload).decode("ascii")}


def _decode(kind: Any, value: Any) -> Any:
    """Decodes ``value`` as the annotated type ``kind`` (dataclasses, lists, optionals)."""
    if value is None:
        return None
    origin = typing.get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(options) == 1:
            return _decode(options[0], value)
        return value
    if origin is list:
        (item,) = typing.get_args(kind)
        return [_decode(item, entry) for entry in value]
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return from_json(kind, value)
    return value


_T = typing.TypeVar("_T")


def from_json(cls: type[_T], body: dict[str, Any]) -> _T:
    """Builds dataclass ``cls`` from a JSON object, ignoring keys it does not know."""
    if hasattr(cls, "decode"):
        return typing.cast(_T, typing.cast(Any, cls).decode(body))
    hints = typing.get_type_hints(cls)
    values = {}
    for item in dataclasses.fields(typing.cast(Any, cls)):
        if item.name == "payload":
            values["payload"] = decode_payload(body)
        elif item.name in body:
            values[item.name] = _decode(hints[item.name], body[item.name])
    return cls(**values)


@dataclass
class Published:
    """The answer to a single publish: the offset, and whether it was a duplicate.

    A duplicate (its idempotency key was in the topic's window) was not stored again;
    ``offset`` is then the first publish's.
    """

    offset: int
    duplicate: bool = False


@dataclass
class BatchPublished:
    """The answer to a batch publish: offsets in request order, and the duplicates.

    ``duplicates`` holds the indices of the messages whose idempotency key was in the
    topic's window (or earlier in the batch): not stored, their offset the first's.
    """

    offsets: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)


@dataclass
class DeliveryRef:
    """Names one delivery: the message's offset and which attempt it is (both fence it)."""

    offset: int
    attempt: int


@dataclass
class InFlightDelivery:
    """A delivery in flight as a group's view lists it: who polled it, until when."""

    offset: int
    attempt: int
    consumer: str | None = None
    """The consumer that polled it, or ``None`` for the anonymous consumer."""
    lease_deadline_ms: int | None = None
    """When its lease runs out (Unix ms; may be past), or ``None`` without a lease."""

    def ref(self) -> DeliveryRef:
        """The ``(offset, attempt)`` that acks, nacks and touches name."""
        return DeliveryRef(self.offset, self.attempt)


@dataclass
class Delivery:
    """A message delivered to a consumer group, with the attempt that fences its ack."""

    offset: int
    attempt: int
    payload: bytes = b""
    key: str | None = None
    headers: dict[str, str] | None = None
    # The broker's clock differs between publishes, so equality is about the message.
    published_at_ms: int | None = field(default=None, compare=False)

    @property
    def text(self) -> str:
        """The payload as UTF-8 text."""
        return self.payload.decode("utf-8")

    def ref(self) -> DeliveryRef:
        """The ``(offset, attempt)`` that acks, nacks and touches name."""
        return DeliveryRef(self.offset, self.attempt)


@dataclass
class ItemError:
    """Why one item of a batch failed (``code`` as the single call's error would be)."""

    code: str
    message: str


@dataclass
class ItemResult:
    """One item of an ack or nack batch: exactly one of ``outcome`` and ``error``."""

    offset: int
    attempt: int
    outcome: str | None = None
    error: ItemError | None = None


@dataclass
class Settled:
    """A consume stream's answer to settlement ``seq`` (numbered from 0 on each
    connection, answered in order): exactly one of ``outcome`` and ``error``."""

    seq: int
    offset: int | None = None
    attempt: int | None = None
    outcome: str | None = None
    """``acked``, ``retry``, ``released``, ``dead_lettered`` or ``touched``."""
    error: ItemError | None = None
    """``not_owned`` (not in flight under that attempt), or ``invalid_argument``."""
    op: str | None = None
    """The settlement answered, ``ack``, ``nack`` or ``touch`` (the client's own record)."""


@dataclass
class PolledBatch:
    """The answer to a batch poll: deliveries, and the results of acks sent with it."""

    deliveries: list[Delivery] = field(default_factory=list)
    acked: list[ItemResult] | None = None


@dataclass
class FixedBackoff:
    """The same delay after every failure."""

    delay_ms: int

    def encode(self) -> dict[str, Any]:
        """The wire form."""
        return {"kind": "fixed", "delay_ms": self.delay_ms}


@dataclass
class ExponentialBackoff:
    """A delay doubling from ``base_ms`` up to ``cap_ms``."""

    base_ms: int
    cap_ms: int

    def encode(self) -> dict[str, Any]:
        """The wire form."""
        return {"kind": "exponential", "base_ms": self.base_ms, "cap_ms": self.cap_ms}


Backoff = Union[FixedBackoff, ExponentialBackoff]


def decode_backoff(body: dict[str, Any] | None) -> Backoff | None:
    """A backoff from its wire form (``kind`` picks the class)."""
    if body is None:
        return None
    if body.get("kind") == "fixed":
        return FixedBackoff(body["delay_ms"])
    return ExponentialBackoff(body["base_ms"], body["cap_ms"])


@dataclass
class GroupCounters:
    """A group's event counters."""

    redeliveries: int = 0
    releases: int = 0
    expired_leases: int = 0
    redrives: int = 0
    purged: int = 0


@dataclass
class DeadLetterNote:
    """A dead letter without its payload: why and when it was given up on."""

    offset: int
    attempts: int
    at_ms: int = 0
    reason: str | None = None


@dataclass
class DeadLetter:
    """A message a group gave up on, with its payload."""

    offset: int
    attempts: int
    at_ms: int = 0
    payload: bytes = b""
    reason: str | None = None
    key: str | None = None
    headers: dict[str, str] | None = None
    published_at_ms: int | None = field(default=None, compare=False)


@dataclass
class DeadLetterPage:
    """One page of dead letters; ``next`` is the following page's ``from`` (or None)."""

    dead_letters: list[DeadLetter] = field(default_factory=list)
    next: int | None = None


@dataclass
class GroupInfo:
    """A group's state in short (as a topic's view lists it)."""

    name: str
    position: int
    attempt: int
    max_attempts: int
    lag: int
    dead_letters: int
    in_flight: DeliveryRef | None = None
    paused: bool = False
    paused_until_ms: int | None = None


@dataclass
class GroupDetail(GroupInfo):
    """A group's full view: state, settings, counters, deliveries in flight, dead letters."""

    lease_ms: int | None = None
    backoff: Backoff | None = None
    max_in_flight: int = 1
    counters: GroupCounters = field(default_factory=GroupCounters)
    deliveries: list[InFlightDelivery] = field(default_factory=list)
    dead_letter_notes: list[DeadLetterNote] = field(default_factory=list)

    @classmethod
    def decode(cls, body: dict[str, Any]) -> GroupDetail:
        """From the wire (the backoff's ``kind`` picks its class)."""
        plain = {key: value for key, value in body.items() if key != "backoff"}
        hints = typing.get_type_hints(cls)
        values = {
            item.name: _decode(hints[item.name], plain[item.name])
            for item in dataclasses.fields(cls)
            if item.name in plain
        }
        return cls(**values, backoff=decode_backoff(body.get("backoff")))


@dataclass
class RetentionInForce:
    """The retention in force for a topic: ``None`` is unlimited."""

    keep_unconsumed: bool = True
    max_age_ms: int | None = None
    max_bytes: int | None = None
    max_messages: int | None = None


@dataclass
class RetentionRemoved:
    """What retention removed from a topic since the server started."""

    messages: int = 0
    bytes: int = 0
    segments: int = 0


UNSET: Any = object()
"""Leaves a retention limit as it is (absent on the wire); ``None`` means unlimited."""


@dataclass
class Retention:
    """A topic's own retention limits as sent: each is UNSET (absent), None or a number."""

    max_age_ms: int | None = UNSET
    max_bytes: int | None = UNSET
    max_messages: int | None = UNSET
    keep_unconsumed: bool | None = UNSET

    def encode(self) -> dict[str, Any]:
        """The wire form: only the limits that were set."""
        return {
            item.name: getattr(self, item.name)
            for item in dataclasses.fields(self)
            if getattr(self, item.name) is not UNSET
        }


@dataclass
class IdempotencyWindow:
    """A topic's idempotency window: a repeated key among the last ``window_messages``
    messages published within ``window_ms`` answers the first offset. Sent at creation,
    ``None`` follows the server's default; in a topic's view both are in force."""

    window_messages: int | None = None
    window_ms: int | None = None

    def encode(self) -> dict[str, Any]:
        """The wire form: only the limits that were set."""
        return {
            item.name: getattr(self, item.name)
            for item in dataclasses.fields(self)
            if getattr(self, item.name) is not None
        }


@dataclass
class TopicSummary:
    """One topic in the topic list."""

    name: str
    start: int
    end: int
    groups: list[str] = field(default_factory=list)
    bytes: int | None = None
    retention: RetentionInForce | None = None
    removed: RetentionRemoved | None = None
    state: str = "ok"
    """``ok`` while the topic serves, ``failed`` while it cannot (see ``failure``)."""
    failure: str | None = None
    failure_kind: str | None = None
    """``damaged`` (repair it), ``unreadable`` or ``stopped`` (recover it)."""


@dataclass
class TopicInfo:
    """A topic's view: its offsets, groups, retention and disk use."""

    name: str
    start: int
    end: int
    groups: list[GroupInfo] = field(default_factory=list)
    bytes: int | None = None
    retention: RetentionInForce | None = None
    removed: RetentionRemoved | None = None
    idempotency: IdempotencyWindow | None = None
    """The idempotency window in force (the topic's own over the server's defaults)."""
    state: str = "ok"
    """``ok`` while the topic serves, ``failed`` while it cannot (see ``failure``)."""
    failure: str | None = None
    failure_kind: str | None = None
    """``damaged`` (repair it), ``unreadable`` or ``stopped`` (recover it)."""


@dataclass
class ChannelInfo:
    """A live channel's settings and counters."""

    name: str
    max_subscribers: int
    mailbox_capacity: int
    subscribers: int = 0
    published: int = 0
    delivered: int = 0
    dropped: int = 0
    mailbox_bytes: int = 0


@dataclass
class ChannelDelivery:
    """What one channel publish did: mailboxes that took it and ones that were full."""

    delivered: int
    dropped: int


@dataclass
class Ticket:
    """A one-use ticket that opens one stream under ``path`` (for browsers' streams)."""

    ticket: str
    path: str
    expires_in_ms: int


@dataclass
class FailedTopic:
    """One failed topic in a degraded ``/healthz``."""

    topic: str
    kind: str
    reason: str


@dataclass
class Health:
    """``/healthz``: ``ok``; ``degraded`` with the failed topics; ``unhealthy`` with a reason."""

    status: str
    reason: str | None = None
    failed_topics: list[FailedTopic] | None = None


@dataclass
class GroupSeeked:
    """The answer to a seek: the group's new position (the next message it delivers)."""

    topic: str
    group: str
    position: int


@dataclass
class GroupPause:
    """The answer to a pause or resume: the pause as it now stands.

    ``changed`` is whether a resume ended a pause (a pause always sets it).
    """

    topic: str
    group: str
    paused: bool
    changed: bool
    paused_until_ms: int | None = None


@dataclass
class TopicRecovered:
    """The answer to a recover: ``recovered`` is whether the topic was failed."""

    topic: str
    recovered: bool


@dataclass
class TopicRepairReport:
    """The answer to a repair: whether it was damaged, the damage, and what was moved."""

    topic: str
    repaired: bool
    damage: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)


@dataclass
class Confirmation:
    """A publish stream's answer for frames ``seq .. seq + count``: offsets, or an error."""

    seq: int
    count: int
    offset: int | None = None
    error: ItemError | None = None
    duplicate: bool = False
    """The one frame covered carried an idempotency key in the topic's window: not stored."""

    def offsets(self) -> list[int]:
        """The offsets the covered frames got (empty when they were refused)."""
        if self.offset is None:
            return []
        return list(range(self.offset, self.offset + self.count))
