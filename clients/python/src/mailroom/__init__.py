"""Clients for the mailroom broker: :class:`Client` (sync) and :class:`AsyncClient` (asyncio).

Both cover every endpoint of the HTTP API, the pipelined publish stream, live channel
subscriptions (WebSocket and SSE) and a consumer loop that acks, nacks, keeps leases and
rides out server restarts. Bodies are dataclasses (:mod:`mailroom.models`), failures typed
exceptions by the server's error code (:mod:`mailroom.errors`).
"""

from . import errors, models
from ._loop import ConsumerStats
from ._options import Timeouts
from .aio import AsyncClient, AsyncGroup
from .aio_consumer import AsyncConsumer
from .client import Client, Group
from .consumer import Consumer
from .errors import ApiError, MailroomError, NotOwned, StreamClosed, TransportError
from .models import Delivery, DeliveryRef

__all__ = [
    "ApiError",
    "AsyncClient",
    "AsyncConsumer",
    "AsyncGroup",
    "Client",
    "Consumer",
    "ConsumerStats",
    "Delivery",
    "DeliveryRef",
    "Group",
    "MailroomError",
    "NotOwned",
    "StreamClosed",
    "Timeouts",
    "TransportError",
    "errors",
    "models",
]
