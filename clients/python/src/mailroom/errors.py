"""Typed errors: every failure the server reports, by its stable error code.

The server answers every failure with ``{"error": "<code>", "message": "..."}``. Each known
code has its own exception class (``NotOwned`` for ``not_owned``), under a class per kind
of status (``Conflict`` for 409), under :class:`ApiError`. A code this version does not know
(from a newer server) still raises: the class of its status, with ``code`` as sent, so
``except NotFound`` keeps working when a new 404 code appears.
"""

from __future__ import annotations


class MailroomError(Exception):
    """The root of every error this package raises."""


class TransportError(MailroomError):
    """The server could not be reached, or the connection broke mid-call."""


class Timeout(TransportError):
    """A call ran out of its time limit (``limit`` names which: connect, request, read)."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message)
        self.limit = limit


class StreamClosed(MailroomError):
    """A stream was closed by the server (or the connection broke).

    On a publish stream the ``unconfirmed`` frames were not published; on a consume
    stream ``unconfirmed`` settlements got no answer (they may or may not have applied).
    """

    def __init__(self, reason: str, unconfirmed: int) -> None:
        super().__init__(f"stream closed ({reason}); {unconfirmed} unconfirmed")
        self.reason = reason
        self.unconfirmed = unconfirmed


class ApiError(MailroomError):
    """The server refused a call: HTTP ``status``, the stable ``code`` and its ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class BadRequest(ApiError):
    """400: the request was malformed or a value out of range."""


class Unauthorized(ApiError):
    """401: the bearer token (or ticket) is missing or wrong."""


class Forbidden(ApiError):
    """403: a browser request from an origin the server does not allow."""


class NotFound(ApiError):
    """404: no such topic, group, channel or route."""


class MethodNotAllowed(ApiError):
    """405: the route does not take this method."""


class Conflict(ApiError):
    """409: the state refused the request (exists already, not owned, over a limit)."""


class PayloadTooLarge(ApiError):
    """413: the body or a message is over its limit."""


class UnsupportedMediaType(ApiError):
    """415: the content type was refused."""


class UpgradeRequired(ApiError):
    """426: the route needs a protocol upgrade."""


class TooManyRequests(ApiError):
    """429: too many long polls or tickets outstanding; try again later."""


class ServerError(ApiError):
    """5xx: the server or its store failed."""


def _code(name: str, base: type[ApiError], doc: str) -> type[ApiError]:
    return type(name, (base,), {"__doc__": doc, "__module__": __name__})


InvalidArgument = _code("InvalidArgument", BadRequest, "400 invalid_argument.")
InvalidBody = _code("InvalidBody", BadRequest, "400 invalid_body.")
MalformedJson = _code("MalformedJson", BadRequest, "400 malformed_json.")
InvalidName = _code("InvalidName", BadRequest, "400 invalid_name.")
NotWebsocket = _code("NotWebsocket", BadRequest, "400 not_websocket.")
ForbiddenOrigin = _code("ForbiddenOrigin", Forbidden, "403 forbidden_origin.")
UnknownTopic = _code("UnknownTopic", NotFound, "404 unknown_topic.")
UnknownGroup = _code("UnknownGroup", NotFound, "404 unknown_group.")
UnknownChannel = _code("UnknownChannel", NotFound, "404 unknown_channel.")
GroupExists = _code("GroupExists", Conflict, "409 group_exists.")
ChannelExists = _code("ChannelExists", Conflict, "409 channel_exists.")
ChannelLimit = _code("ChannelLimit", Conflict, "409 channel_limit.")
SubscriberLimit = _code("SubscriberLimit", Conflict, "409 subscriber_limit.")
NotOwned = _code("NotOwned", Conflict, "409 not_owned: the delivery is not in flight.")
TooManyLongPolls = _code("TooManyLongPolls", TooManyRequests, "429 too_many_long_polls.")
TooManyTickets = _code("TooManyTickets", TooManyRequests, "429 too_many_tickets.")
Internal = _code("Internal", ServerError, "500 internal.")
StorageError = _code("StorageError", ServerError, "500 storage_error.")
StoreFailed = _code("StoreFailed", ServerError, "503 store_failed: the store is fail-stop.")
TopicLimit = _code("TopicLimit", Conflict, "409 topic_limit: the server holds its most topics.")
ConnectionLimit = _code("ConnectionLimit", ServerError, "503 connection_limit.")
TopicFailed = _code("TopicFailed", ServerError, "503 topic_failed: repair or recover it.")
StoreUnavailable = _code("StoreUnavailable", ServerError, "503 store_unavailable.")
NotSupported = _code("NotSupported", ServerError, "501 not_supported: the backend lacks this call.")

#: The class of each known code (``crates/mailroom-api/src/error.rs`` lists them).
BY_CODE: dict[str, type[ApiError]] = {
    "bad_request": BadRequest,
    "invalid_argument": InvalidArgument,
    "invalid_body": InvalidBody,
    "malformed_json": MalformedJson,
    "invalid_name": InvalidName,
    "not_websocket": NotWebsocket,
    "unauthorized": Unauthorized,
    "forbidden_origin": ForbiddenOrigin,
    "not_found": NotFound,
    "unknown_topic": UnknownTopic,
    "unknown_group": UnknownGroup,
    "unknown_channel": UnknownChannel,
    "method_not_allowed": MethodNotAllowed,
    "group_exists": GroupExists,
    "channel_exists": ChannelExists,
    "channel_limit": ChannelLimit,
    "subscriber_limit": SubscriberLimit,
    "not_owned": NotOwned,
    "conflict": Conflict,
    "payload_too_large": PayloadTooLarge,
    "unsupported_media_type": UnsupportedMediaType,
    "upgrade_required": UpgradeRequired,
    "too_many_long_polls": TooManyLongPolls,
    "too_many_tickets": TooManyTickets,
    "internal": Internal,
    "storage_error": StorageError,
    "store_failed": StoreFailed,
    "topic_limit": TopicLimit,
    "connection_limit": ConnectionLimit,
    "topic_failed": TopicFailed,
    "store_unavailable": StoreUnavailable,
    "not_supported": NotSupported,
    "error": ApiError,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    426: UpgradeRequired,
    429: TooManyRequests,
}


def api_error(status: int, code: str, message: str) -> ApiError:
    """The typed exception for an error answer; unknown codes fall back to their status."""
    cls = BY_CODE.get(code)
    if cls is None or cls is ApiError:
        cls = _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, code, message)
