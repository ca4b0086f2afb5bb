"""Asyncio streams: the pipelined publish stream and live channel subscriptions."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from . import _calls
from ._options import ws_url
from .errors import MailroomError, StreamClosed, TransportError
from .models import Confirmation, Message, from_json
from .streams import PUBLISH_WINDOW_MAX, publish_frame, publish_path, refusal, sse_events

if TYPE_CHECKING:
    from .aio import AsyncClient


async def open_ws(client: AsyncClient, path: str) -> ClientConnection:
    """Opens a WebSocket to ``path``, turning a refused handshake into its typed error."""
    headers = {} if client.token is None else {"Authorization": f"Bearer {client.token}"}
    try:
        return await connect(
            ws_url(client.base_url, path),
            additional_headers=headers,
            open_timeout=client.timeouts.connect + client.timeouts.request,
            max_size=None,
            compression=None,
        )
    except InvalidStatus as refused:
        raise refusal(refused) from refused
    except (OSError, WebSocketException, TimeoutError) as error:
        raise TransportError(f"WebSocket to {path}: {error}") from error


class AsyncPublishStream:
    """Many messages in flight on one WebSocket (see :class:`mailroom.streams.PublishStream`)."""

    def __init__(self, socket: ClientConnection, window: int) -> None:
        self._socket = socket
        self.window = window
        self._sent = 0
        self._confirmed = 0
        self._ready: deque[Confirmation] = deque()

    @classmethod
    async def open(cls, client: AsyncClient, topic: str, window: int) -> AsyncPublishStream:
        """Opens the stream of ``topic`` (404 ``unknown_topic`` if it does not exist)."""
        if not 1 <= window <= PUBLISH_WINDOW_MAX:
            raise ValueError(f"window must be 1..={PUBLISH_WINDOW_MAX}")
        return cls(await open_ws(client, publish_path(topic)), window)

    @property
    def in_flight(self) -> int:
        """Messages sent and not yet confirmed."""
        return self._sent - self._confirmed

    async def send(self, payload: bytes | str | Message) -> int:
        """Sends one message (a :class:`~mailroom.models.Message` with its metadata); its ``seq``."""
        frame = publish_frame(payload)
        while self.in_flight >= self.window:
            await self._read()
        try:
            await self._socket.send(frame)
        except ConnectionClosed as closed:
            raise self._closed(closed) from closed
        self._sent += 1
        return self._sent - 1

    async def confirmed(self) -> Confirmation | None:
        """The next confirmation (waiting for it), or None when nothing is in flight."""
        if not self._ready and self.in_flight > 0:
            await self._read()
        return self._ready.popleft() if self._ready else None

    async def flush(self) -> list[Confirmation]:
        """Waits until every message sent is confirmed; the confirmations not yet taken."""
        while self._confirmed < self._sent:
            await self._read()
        taken = list(self._ready)
        self._ready.clear()
        return taken

    async def close(self) -> None:
        """Closes the stream (confirmations still owed are not sent: flush first)."""
        await self._socket.close()

    async def __aenter__(self) -> AsyncPublishStream:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def _read(self) -> None:
        try:
            frame = await self._socket.recv()
        except ConnectionClosed as closed:
            raise self._closed(closed) from closed
        confirmation = from_json(Confirmation, json.loads(frame))
        self._confirmed = confirmation.seq + confirmation.count
        self._ready.append(confirmation)

    def _closed(self, closed: ConnectionClosed) -> MailroomError:
        reason = closed.rcvd.reason if closed.rcvd is not None else "connection lost"
        return StreamClosed(reason or "closed", self.in_flight)


class AsyncSubscription:
    """A live channel subscription: ``async for`` payloads; ends when the channel closes."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            message = await self.next()
            if message is None:
                return
            yield message

    async def next(self) -> bytes | None:
        """The next message, or None once the stream ended."""
        raise NotImplementedError

    async def close(self) -> None:
        """Ends the subscription."""
        raise NotImplementedError

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class AsyncWsSubscription(AsyncSubscription):
    """A subscription over the channel's WebSocket: one frame per message."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket

    async def next(self) -> bytes | None:
        """The next message, or None once the server closed the stream."""
        try:
            frame = await self._socket.recv()
        except ConnectionClosed:
            return None
        return frame.encode("utf-8") if isinstance(frame, str) else frame

    async def close(self) -> None:
        """Closes the WebSocket."""
        await self._socket.close()


async def ws_subscription(client: AsyncClient, channel: str) -> AsyncWsSubscription:
    """Subscribes over WebSocket (409 ``subscriber_limit``, 404 ``unknown_channel``)."""
    path = f"/v1/channels/{_calls.name('channel', channel)}/ws"
    return AsyncWsSubscription(await open_ws(client, path))


class AsyncSseSubscription(AsyncSubscription):
    """A subscription over the channel's Server-Sent Events stream."""

    def __init__(self, http: httpx.AsyncClient, response: httpx.Response) -> None:
        self._http = http
        self._response = response
        self._lines = response.aiter_lines()
        self._pending: deque[bytes] = deque()

    async def next(self) -> bytes | None:
        """The next message, or None once the stream ended."""
        lines: list[str] = []
        try:
            while not self._pending:
                line = await self._lines.__anext__()
                lines.append(line)
                if line == "":
                    self._pending.extend(sse_events(iter(lines)))
                    lines = []
        except StopAsyncIteration:
            return None
        except httpx.HTTPError as error:
            raise _calls.transport_error(error) from error
        return self._pending.popleft()

    async def close(self) -> None:
        """Closes the stream."""
        await self._response.aclose()
        await self._http.aclose()


async def sse_subscription(client: AsyncClient, channel: str) -> AsyncSseSubscription:
    """Subscribes over SSE; the stream may stay idle, so reads have no time limit."""
    path = f"/v1/channels/{_calls.name('channel', channel)}/events"
    timeout = httpx.Timeout(None, connect=client.timeouts.connect)
    http = httpx.AsyncClient(
        base_url=client.base_url, headers=client._http.headers, timeout=timeout
    )
    try:
        response = await http.send(http.build_request("GET", path), stream=True)
    except httpx.HTTPError as error:
        await http.aclose()
        raise _calls.transport_error(error) from error
    if response.status_code >= 400:
        await response.aread()
        await response.aclose()
        await http.aclose()
        _calls.raise_for(response)
    return AsyncSseSubscription(http, response)
