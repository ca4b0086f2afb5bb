"""The bodies of the API as dataclasses, decoded from and encoded to the wire's JSON.

Payloads are ``bytes``: the wire carries them as ``payload`` (UTF-8 text) or
``payload_base64``, and the client hides which. Fields a newer server adds are ignored
when decoding, so an older client keeps working; fields that are optional on the wire are
optional here (``None`` when absent), which is also how new ones get added.

The types live in modules by what they describe (:mod:`.deliveries`, :mod:`.groups`,
:mod:`.topics`, :mod:`.channels`; decoding in :mod:`.decoding`) and are all importable
from here.
"""

from __future__ import annotations

from .decoding import decode_payload, from_json
from .deliveries import (
    NackKind,
    Ref,
    Message,
    batch_message,
    Published,
    BatchPublished,
    DeliveryRef,
    Delivery,
    ItemError,
    ItemResult,
    Settled,
    PolledBatch,
    Confirmation,
)
from .groups import (
    InFlightDelivery,
    FixedBackoff,
    ExponentialBackoff,
    Backoff,
    decode_backoff,
    GroupCounters,
    DeadLetterNote,
    DeadLetter,
    DeadLetterPage,
    GroupInfo,
    GroupDetail,
    GroupSeeked,
    GroupPause,
)
from .topics import (
    RetentionInForce,
    RetentionRemoved,
    Retention,
    IdempotencyWindow,
    TopicSummary,
    TopicInfo,
    FailedTopic,
    Health,
    TopicRecovered,
    TopicRepairReport,
)
from .channels import ChannelInfo, ChannelDelivery, Ticket

__all__ = [
    "Backoff",
    "BatchPublished",
    "ChannelDelivery",
    "ChannelInfo",
    "Confirmation",
    "DeadLetter",
    "DeadLetterNote",
    "DeadLetterPage",
    "Delivery",
    "DeliveryRef",
    "ExponentialBackoff",
    "FailedTopic",
    "FixedBackoff",
    "GroupCounters",
    "GroupDetail",
    "GroupInfo",
    "GroupPause",
    "GroupSeeked",
    "Health",
    "IdempotencyWindow",
    "InFlightDelivery",
    "ItemError",
    "ItemResult",
    "Message",
    "NackKind",
    "PolledBatch",
    "Published",
    "Ref",
    "Retention",
    "RetentionInForce",
    "RetentionRemoved",
    "Settled",
    "Ticket",
    "TopicInfo",
    "TopicRecovered",
    "TopicRepairReport",
    "TopicSummary",
    "batch_message",
    "decode_backoff",
    "decode_payload",
    "from_json",
]
