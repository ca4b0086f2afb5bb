"""The consume stream: a group's deliveries pushed over one WebSocket, settled on it.

    with client.consume_stream("orders", "billing", window=16, consumer="w1") as stream:
        for delivery in stream:
            handle(delivery)
            stream.ack(delivery)

The server pushes deliveries as they become available, never more than ``window``
unsettled (``window`` is 1 to 4096 and at most the group's ``max_in_flight``: 400
otherwise). :meth:`ConsumeStream.ack`, :meth:`~ConsumeStream.nack` and
:meth:`~ConsumeStream.touch` send settlements on the same socket and return their
``seq`` (numbered from 0 on the connection); the server answers each one, in order, with
a :class:`~mailroom.models.Settled` (its ``outcome``, or ``error`` ``not_owned`` for a
delivery no longer in flight under that attempt). Answers are kept until taken with
:meth:`~ConsumeStream.answers` or :meth:`~ConsumeStream.flush`. An ack or nack frees a
slot of the window, and the server sends the next delivery.

A reader thread takes every frame as it arrives, so deliveries and answers are known
(and leases can be touched) while the caller is busy.

Closing: when the server closes the stream (shutdown, a deleted group) or the connection
breaks, iteration ends and :attr:`~ConsumeStream.closed` holds the reason; settling then
raises :class:`~mailroom.errors.StreamClosed`. A delivery received but not handed out yet
is dropped once an ack or nack of it (sent again after a reconnect) is answered: it is
never handed out settled. The deliveries not settled stay in flight
as an HTTP consumer's would: their leases run out, or a stream opened again with the same
``consumer`` gets them back first, with the same attempts. The consumer loop
(``group.consume(stream=True)``) does exactly that after a server restart.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection

from . import _calls
from .errors import MailroomError, StreamClosed, TransportError
from .models import Delivery, NackKind, Ref, Settled, from_json
from .streams import open_ws

if TYPE_CHECKING:
    from .client import Client

CONSUME_STREAM_WINDOW_MAX = 4096
"""The largest window the server takes."""

Key = tuple[int, int]
"""A delivery's ``(offset, attempt)``."""


@dataclass
class Settlement:
    """One settlement as the client sent it: ``ack``, ``nack`` (with options) or ``touch``."""

    op: str
    offset: int
    attempt: int
    kind: NackKind | None = None
    reason: str | None = None
    delay_ms: int | None = None
    seq: int = -1
    """Its number on the connection it was last sent on."""

    @property
    def key(self) -> Key:
        """The delivery it settles."""
        return (self.offset, self.attempt)

    def frame(self) -> str:
        """The text frame."""
        body: dict[str, Any] = {"op": self.op, "offset": self.offset, "attempt": self.attempt}
        if self.op == "nack":
            options = {"kind": self.kind, "reason": self.reason, "delay_ms": self.delay_ms}
            body.update({k: v for k, v in options.items() if v is not None})
        return json.dumps(body)


def stream_path(topic: str, group: str, window: int, consumer: str | None) -> str:
    """The upgrade request's path and query."""
    if not 1 <= window <= CONSUME_STREAM_WINDOW_MAX:
        raise ValueError(f"window must be 1..={CONSUME_STREAM_WINDOW_MAX}")
    query: dict[str, Any] = {"window": window}
    if consumer is not None:
        query["consumer"] = consumer
    return f"{_calls.group_path(topic, group)}/consume/ws?{urlencode(query)}"


def opened(text: str | bytes) -> tuple[str, int]:
    """The consumer identity and window of the stream's first frame."""
    body = json.loads(text)
    if not isinstance(body, dict) or body.get("type") != "opened":
        raise TransportError(f"expected an opened frame, got {str(text)[:200]}")
    return str(body["consumer"]), int(body["window"])


class Ledger:
    """What a stream knows: deliveries not handed out, answers not taken, settlements not
    answered, deliveries not settled. Plain data; the streams guard it with their lock."""

    def __init__(self) -> None:
        self.deliveries: deque[Delivery] = deque()
        self.answers: deque[Settled] = deque()
        self.pending: deque[Settlement] = deque()
        self.unsettled: dict[Key, Delivery] = {}
        self.next_seq = 0
        self.closed: str | None = None
        self.failure: MailroomError | None = None

    def take(self, text: str | bytes) -> None:
        """Takes one server frame."""
        body = json.loads(text)
        kind = body.get("type") if isinstance(body, dict) else None
        if kind == "delivery":
            delivery = from_json(Delivery, body)
            key = (delivery.offset, delivery.attempt)
            self.deliveries.append(delivery)
            # One a settlement sent again after a reconnect settles is not unsettled.
            if not any(s.key == key and s.op != "touch" for s in self.pending):
                self.unsettled[key] = delivery
        elif kind in ("settled", "error"):
            answer = from_json(Settled, body)
            if not self.pending or self.pending[0].seq != answer.seq:
                expected = self.pending[0].seq if self.pending else None
                raise TransportError(f"answer to settlement {answer.seq}, expected {expected}")
            settlement = self.pending.popleft()
            answer.op, answer.offset, answer.attempt = settlement.op, *settlement.key
            if settlement.op != "touch":
                self.drop_settled(settlement.key)
            elif answer.error is not None:
                self.unsettled.pop(settlement.key, None)  # no longer ours: stop touching
            self.answers.append(answer)
        else:
            raise TransportError(f"unexpected consume stream frame: {str(text)[:200]}")

    def drop_settled(self, key: Key) -> None:
        """Drops the buffered copy of a delivery an ack or nack was just answered for.

        After a reconnect the server sends a delivery still in flight before it answers
        the ack sent again for it; when both arrive in one read, the copy must not be
        handed out: it is settled (answered ``acked``) or no longer ours (``not_owned``).
        """
        if any((d.offset, d.attempt) == key for d in self.deliveries):
            kept = [d for d in self.deliveries if (d.offset, d.attempt) != key]
            self.deliveries = deque(kept)

    def settle(self, settlement: Settlement) -> int:
        """Numbers ``settlement`` and records it as unanswered (before it is sent, so a
        failed send leaves it there for a reconnecting loop to send again)."""
        settlement.seq = self.next_seq
        self.next_seq += 1
        self.pending.append(settlement)
        if settlement.op != "touch":
            self.unsettled.pop(settlement.key, None)
        return settlement.seq

    def closed_error(self) -> MailroomError:
        """The error of settling once the stream closed."""
        return StreamClosed(self.closed or "closed", len(self.pending))


def close_reason(closed: ConnectionClosed) -> str:
    """The server's close reason, or what broke."""
    if closed.rcvd is not None:
        return closed.rcvd.reason or f"closed ({closed.rcvd.code})"
    return "connection lost"


class ConsumeStream:
    """A group's deliveries over one WebSocket, settled on it (see the module doc)."""

    def __init__(self, socket: ClientConnection, consumer: str, window: int) -> None:
        self._socket = socket
        self.consumer = consumer
        """The consumer identity the deliveries are owned by (the server's if none was given)."""
        self.window = window
        """The most deliveries unsettled at once."""
        self._ledger = Ledger()
        self._changed = threading.Condition()
        self._sending = threading.Lock()
        self._interrupted = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @classmethod
    def open(
        cls, client: Client, topic: str, group: str, window: int = 1, consumer: str | None = None
    ) -> ConsumeStream:
        """Opens the stream (404 ``unknown_group``, 400 for a window the group cannot fill)."""
        socket = open_ws(client, stream_path(topic, group, window, consumer))
        try:
            identity, granted = opened(socket.recv(timeout=client.timeouts.request))
        except (ConnectionClosed, TimeoutError) as error:
            socket.close()
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
        with self._changed:
            return list(self._ledger.unsettled.values())

    def pending(self) -> list[Settlement]:
        """Settlements sent (or tried) and not answered, in order."""
        with self._changed:
            return list(self._ledger.pending)

    def buffered(self) -> list[Delivery]:
        """Deliveries received and not handed out yet."""
        with self._changed:
            return list(self._ledger.deliveries)

    def receive(self, timeout: float | None = None) -> Delivery | None:
        """The next delivery, waiting for it; None once the stream closed (or after
        :meth:`interrupt`). Raises :class:`TimeoutError` after ``timeout`` seconds."""
        with self._changed:
            ready = self._changed.wait_for(
                lambda: self._ledger.deliveries or self._ledger.closed or self._interrupted,
                timeout,
            )
            if self._ledger.failure is not None:
                raise self._ledger.failure
            if self._ledger.deliveries:
                return self._ledger.deliveries.popleft()
            if not ready:
                raise TimeoutError(f"no delivery within {timeout}s")
            self._interrupted = False
            return None

    def __iter__(self) -> Iterator[Delivery]:
        while (delivery := self.receive()) is not None:
            yield delivery

    def interrupt(self) -> None:
        """Makes the :meth:`receive` waiting in another thread (or the next one) return
        None without closing the stream (how a consumer loop's ``stop`` wakes it)."""
        with self._changed:
            self._interrupted = True
            self._changed.notify_all()

    def ack(self, delivery: Ref) -> int:
        """Acks ``delivery``; the settlement's ``seq``."""
        return self.send(Settlement("ack", delivery.offset, delivery.attempt))

    def nack(
        self,
        delivery: Ref,
        *,
        kind: NackKind | None = None,
        reason: str | None = None,
        delay_ms: int | None = None,
    ) -> int:
        """Nacks, releases or rejects ``delivery``; the ``seq``."""
        return self.send(
            Settlement("nack", delivery.offset, delivery.attempt, kind, reason, delay_ms)
        )

    def touch(self, delivery: Ref) -> int:
        """Extends the lease of ``delivery``; the ``seq``."""
        return self.send(Settlement("touch", delivery.offset, delivery.attempt))

    def send(self, settlement: Settlement) -> int:
        """Sends one settlement (thread-safe); its ``seq``."""
        with self._sending:
            with self._changed:
                if self._ledger.closed is not None:
                    self._ledger.pending.append(settlement)
                    raise self._ledger.closed_error()
                seq = self._ledger.settle(settlement)
            try:
                self._socket.send(settlement.frame())
            except ConnectionClosed as closed:
                self._closed(close_reason(closed))
                raise self._ledger.closed_error() from closed
        return seq

    def answers(self) -> list[Settled]:
        """The answers that arrived and were not taken yet, in ``seq`` order."""
        with self._changed:
            taken = list(self._ledger.answers)
            self._ledger.answers.clear()
            return taken

    def flush(self, timeout: float | None = None) -> list[Settled]:
        """Waits until every settlement sent is answered; the answers not taken yet.

        Raises :class:`~mailroom.errors.StreamClosed` if the stream closes first, and
        :class:`TimeoutError` after ``timeout`` seconds.
        """
        with self._changed:
            done = self._changed.wait_for(
                lambda: not self._ledger.pending or self._ledger.closed, timeout
            )
            if self._ledger.pending:
                if not done:
                    raise TimeoutError(f"{len(self._ledger.pending)} settlements unanswered")
                raise self._ledger.closed_error()
        return self.answers()

    def close(self) -> None:
        """Closes the connection; deliveries not settled stay in flight."""
        self._socket.close()
        self._reader.join()

    def __enter__(self) -> ConsumeStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _read(self) -> None:
        """The reader thread: every frame into the ledger, until the stream ends."""
        while True:
            try:
                text = self._socket.recv()
            except ConnectionClosed as closed:
                self._closed(close_reason(closed))
                return
            with self._changed:
                try:
                    self._ledger.take(text)
                except (MailroomError, ValueError, KeyError, TypeError) as error:
                    failure = error if isinstance(error, MailroomError) else None
                    self._ledger.failure = failure or TransportError(f"bad frame: {error}")
                    self._ledger.closed = "bad frame"
                    self._changed.notify_all()
                    break
                self._changed.notify_all()
        self._socket.close()

    def _closed(self, reason: str) -> None:
        with self._changed:
            if self._ledger.closed is None:
                self._ledger.closed = reason
            self._changed.notify_all()


def consume_stream(
    client: Client, topic: str, group: str, window: int, consumer: str | None
) -> ConsumeStream:
    """Opens a consume stream (what :meth:`mailroom.Client.consume_stream` calls)."""
    return ConsumeStream.open(client, topic, group, window, consumer)
