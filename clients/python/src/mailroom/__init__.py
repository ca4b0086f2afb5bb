"""Clients for the mailroom broker: :class:`Client` (sync) and :class:`AsyncClient` (asyncio).

Both cover every endpoint of the HTTP API, the pipelined publish stream, the consume
stream, live channel subscriptions (WebSocket and SSE) and a consumer loop (over long polls
or the consume stream) that acks, nacks, keeps leases and rides out server restarts. Bodies are dataclasses (:mod:`mailroom.models`), failures typed
exceptions by the server's error code (:mod:`mailroom.errors`).
"""

from . import errors, models
from ._loop import ConsumerStats
from ._options import Timeouts
from .aio import AsyncClient, AsyncGroup
from .aio_consume_stream import AsyncConsumeStream
from .aio_consumer import AsyncConsumer
from .aio_stream_consumer import AsyncStreamConsumer
from .client import Client, Group
from .consume_stream import ConsumeStream
from .consumer import Consumer
from .stream_consumer import StreamConsumer
from .errors import ApiError, MailroomError, NotOwned, StreamClosed, TransportError
from .models import Delivery, DeliveryRef

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncConsumeStream",
    "AsyncConsumer",
    "AsyncStreamConsumer",
    "AsyncGroup",
    "Client",
    "ConsumeStream",
    "Consumer",
    "ConsumerStats",
    "Delivery",
    "DeliveryRef",
    "Group",
    "MailroomError",
    "NotOwned",
    "StreamClosed",
    "StreamConsumer",
    "Timeouts",
    "TransportError",
    "errors",
    "models",
]
