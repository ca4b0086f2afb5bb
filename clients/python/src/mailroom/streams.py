"""Synchronous streams: the pipelined publish stream and live channel subscriptions."""

from __future__ import annotations

import base64
import json
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection, connect

from . import _calls
from ._options import ws_url
from .errors import MailroomError, StreamClosed, TransportError, api_error
from .models import Confirmation, Message, from_json

if TYPE_CHECKING:
    from .client import Client

PUBLISH_WINDOW_MAX = 4096
"""The most frames the server reads ahead of its confirmations (a larger window could stall)."""


def open_ws(client: Client, path: str) -> ClientConnection:
    """Opens a WebSocket to ``path``, turning a refused handshake into its typed error."""
    headers = {} if client.token is None else {"Authorization": f"Bearer {client.token}"}
    try:
        opening = connect(
            ws_url(client.base_url, path),
            additional_headers=headers,
            open_timeout=client.timeouts.connect + client.timeouts.request,
            max_size=None,
            compression=None,
        )
        # Entering works both where connect() returns the connection (websockets < 17)
        # and where it returns a context manager that connects (later ones).
        return opening.__enter__()
    except InvalidStatus as refused:
        raise refusal(refused) from refused
    except (OSError, WebSocketException, TimeoutError) as error:
        raise TransportError(f"WebSocket to {path}: {error}") from error


def publish_path(topic: str) -> str:
    """The publish stream's path: text frames carry JSON messages (metadata and all)."""
    return f"/v1/topics/{_calls.name('topic', topic)}/publish/ws?text=json"


def publish_frame(payload: bytes | str | Message) -> bytes | str:
    """One message's frame: bare bytes (a binary frame), or a JSON text frame for a
    :class:`~mailroom.models.Message` (its key, headers and idempotency key)."""
    if isinstance(payload, Message):
        return json.dumps(payload.encode())
    return payload.encode("utf-8") if isinstance(payload, str) else bytes(payload)


def refusal(refused: InvalidStatus) -> MailroomError:
    """The typed error of a WebSocket handshake the server refused with a JSON body."""
    response = refused.response
    try:
        body = json.loads(response.body or b"{}")
        return api_error(response.status_code, str(body["error"]), str(body.get("message", "")))
    except (ValueError, KeyError, TypeError):
        return api_error(response.status_code, "error", str(refused))


class PublishStream:
    """Many messages in flight on one WebSocket, each confirmed once durable.

    :meth:`send` returns the message's ``seq`` (numbered from 0) and, while ``window``
    messages await confirmation, first reads confirmations (kept for :meth:`confirmed`).
    :meth:`flush` waits for all of them. If the server closes the stream (shutdown, a
    deleted topic), :meth:`flush` and :meth:`confirmed` raise
    :class:`~mailroom.errors.StreamClosed` with the close reason once every confirmation
    that arrived was handed out; frames still unconfirmed were not published.
    """

    def __init__(self, socket: ClientConnection, window: int) -> None:
        self._socket = socket
        self.window = window
        self._sent = 0
        self._confirmed = 0
        self._ready: deque[Confirmation] = deque()

    @classmethod
    def open(cls, client: Client, topic: str, window: int) -> PublishStream:
        """Opens the stream of ``topic`` (404 ``unknown_topic`` if it does not exist)."""
        if not 1 <= window <= PUBLISH_WINDOW_MAX:
            raise ValueError(f"window must be 1..={PUBLISH_WINDOW_MAX}")
        return cls(open_ws(client, publish_path(topic)), window)

    @property
    def in_flight(self) -> int:
        """Messages sent and not yet confirmed."""
        return self._sent - self._confirmed

    def send(self, payload: bytes | str | Message) -> int:
        """Sends one message; its ``seq``.

        A :class:`~mailroom.models.Message` carries a key, headers and an idempotency key
        (its confirmation's ``duplicate`` says whether the key was in the topic's window).
        """
        frame = publish_frame(payload)
        while self.in_flight >= self.window:
            self._read()
        try:
            self._socket.send(frame)
        except ConnectionClosed as closed:
            raise self._closed(closed) from closed
        self._sent += 1
        return self._sent - 1

    def confirmed(self) -> Confirmation | None:
        """The next confirmation (waiting for it), or None when nothing is in flight."""
        if not self._ready and self.in_flight > 0:
            self._read()
        return self._ready.popleft() if self._ready else None

    def flush(self) -> list[Confirmation]:
        """Waits until every message sent is confirmed; the confirmations not yet taken."""
        while self._confirmed < self._sent:
            self._read()
        taken = list(self._ready)
        self._ready.clear()
        return taken

    def close(self) -> None:
        """Closes the stream (confirmations still owed are not sent: flush first)."""
        self._socket.close()

    def __enter__(self) -> PublishStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _read(self) -> None:
        try:
            frame = self._socket.recv()
        except ConnectionClosed as closed:
            raise self._closed(closed) from closed
        confirmation = from_json(Confirmation, json.loads(frame))
        self._confirmed = confirmation.seq + confirmation.count
        self._ready.append(confirmation)

    def _closed(self, closed: ConnectionClosed) -> MailroomError:
        reason = closed.rcvd.reason if closed.rcvd is not None else "connection lost"
        return StreamClosed(reason or "closed", self.in_flight)


class Subscription:
    """A live channel subscription: iterate for payloads (bytes); ends when the channel closes."""

    def __iter__(self) -> Iterator[bytes]:
        while True:
            message = self.next()
            if message is None:
                return
            yield message

    def next(self, timeout: float | None = None) -> bytes | None:
        """The next message, or None once the stream ended (``timeout``: seconds, WebSocket only)."""
        raise NotImplementedError

    def close(self) -> None:
        """Ends the subscription."""
        raise NotImplementedError

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class WsSubscription(Subscription):
    """A subscription over the channel's WebSocket: one frame per message."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket

    def next(self, timeout: float | None = None) -> bytes | None:
        """The next message, or None once the server closed the stream."""
        try:
            frame = self._socket.recv(timeout=timeout)
        except ConnectionClosed:
            return None
        return frame.encode("utf-8") if isinstance(frame, str) else frame

    def close(self) -> None:
        """Closes the WebSocket."""
        self._socket.close()


def ws_subscription(client: Client, channel: str) -> WsSubscription:
    """Subscribes over WebSocket (409 ``subscriber_limit``, 404 ``unknown_channel``)."""
    path = f"/v1/channels/{_calls.name('channel', channel)}/ws"
    return WsSubscription(open_ws(client, path))


def sse_events(lines: Iterator[str]) -> Iterator[bytes]:
    """Payloads from Server-Sent Event lines (``event: base64`` carries bytes)."""
    event, data = "message", list[str]()
    for line in lines:
        if line == "":
            if data:
                text = "\n".join(data)
                yield base64.b64decode(text) if event == "base64" else text.encode("utf-8")
            event, data = "message", []
        elif line.startswith(":"):
            continue  # a keep-alive comment
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "event":
                event = value
            elif key == "data":
                data.append(value)


class SseSubscription(Subscription):
    """A subscription over the channel's Server-Sent Events stream."""

    def __init__(self, http: httpx.Client, response: httpx.Response) -> None:
        self._http = http
        self._response = response
        self._events = sse_events(response.iter_lines())

    def next(self, timeout: float | None = None) -> bytes | None:
        """The next message, or None once the stream ended (``timeout`` is not used: SSE
        reads wait until a message or the end arrives)."""
        try:
            return next(self._events)
        except StopIteration:
            return None
        except httpx.HTTPError as error:
            raise _calls.transport_error(error) from error

    def close(self) -> None:
        """Closes the stream."""
        self._response.close()
        self._http.close()


def sse_subscription(client: Client, channel: str) -> SseSubscription:
    """Subscribes over SSE; the stream may stay idle, so reads have no time limit."""
    path = f"/v1/channels/{_calls.name('channel', channel)}/events"
    timeout = httpx.Timeout(None, connect=client.timeouts.connect)
    http = httpx.Client(base_url=client.base_url, headers=client._http.headers, timeout=timeout)
    try:
        response = http.send(http.build_request("GET", path), stream=True)
    except httpx.HTTPError as error:
        http.close()
        raise _calls.transport_error(error) from error
    if response.status_code >= 400:
        response.read()
        response.close()
        http.close()
        _calls.raise_for(response)
    return SseSubscription(http, response)
