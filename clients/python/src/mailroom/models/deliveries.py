"""Messages and deliveries: what is published (and the answers), what a poll hands out,
the references that settle a delivery, and the per-item results of batches.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol


NackKind = Literal["nack", "release", "reject"]
"""How a nack ends a delivery: a failure, a hand-back (not a failure), or dead-letter now."""


class Ref(Protocol):
    """Anything that names a delivery: a :class:`Delivery` or a :class:`DeliveryRef`."""

    @property
    def offset(self) -> int: ...  # noqa: D102

    @property
    def attempt(self) -> int: ...  # noqa: D102


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
    """The answer to a batch poll: deliveries, and the results of the acks and nacks sent
    with it."""

    deliveries: list[Delivery] = field(default_factory=list)
    acked: list[ItemResult] | None = None
    nacked: list[ItemResult] | None = None


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
