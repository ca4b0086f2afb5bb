"""Decoding a JSON body into its dataclass: payloads whichever way the wire carried them,
nested dataclasses, lists and optionals, and keys the client does not know ignored.
"""

from __future__ import annotations

import base64
import dataclasses
import types
import typing
from typing import Any, Union


def decode_payload(body: dict[str, Any]) -> bytes:
    """The payload of a delivery or dead letter, whichever way the wire carried it."""
    if body.get("payload") is not None:
        return str(body["payload"]).encode("utf-8")
    if body.get("payload_base64") is not None:
        return base64.b64decode(body["payload_base64"])
    return b""


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
