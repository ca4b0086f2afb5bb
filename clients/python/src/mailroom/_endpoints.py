"""Every endpoint method written once for both clients.

Each endpoint is a function that builds its :class:`~mailroom._calls.Call` (the request
and the decoder of its answer) with the method's public signature and documentation. An
:class:`endpoint` on a class turns it into a method that runs the call on the client: the
sync :class:`~mailroom.Client` returns the answer, the asyncio
:class:`~mailroom.AsyncClient` an awaitable of it. :class:`Endpoints` and
:class:`GroupEndpoints` hold the methods that are nothing but a call, so the two clients
(and their group handles) cannot differ in what they send or how they decode it; the
methods that do I/O of their own (streams, iterators, the consumer loop) stay in each.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, Literal, ParamSpec, Protocol, TypeVar, overload

from . import _calls, reads
from ._calls import Call

P = ParamSpec("P")
T = TypeVar("T")


class SyncRunner(Protocol):
    """A client whose calls return their answers (:class:`~mailroom.Client`)."""

    @property
    def _is_async(self) -> Literal[False]: ...

    def run(self, call: Call[T]) -> T: ...  # noqa: D102


class AsyncRunner(Protocol):
    """A client whose calls return awaitables (:class:`~mailroom.AsyncClient`)."""

    @property
    def _is_async(self) -> Literal[True]: ...

    def run(self, call: Call[T]) -> Awaitable[T]: ...  # noqa: D102


class SyncGroup(Protocol):
    """A group handle of a sync client."""

    @property
    def client(self) -> SyncRunner: ...  # noqa: D102

    topic: str
    name: str


class AsyncGroup(Protocol):
    """A group handle of an asyncio client."""

    @property
    def client(self) -> AsyncRunner: ...  # noqa: D102

    topic: str
    name: str


class endpoint(Generic[P, T]):  # noqa: N801 - used as a decorator-like descriptor
    """A client method that builds its call with ``build`` and runs it."""

    def __init__(self, build: Callable[P, Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> endpoint[P, T]: ...

    @overload
    def __get__(self, instance: AsyncRunner, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, instance: SyncRunner, owner: type[Any]) -> Callable[P, T]: ...

    def __get__(self, instance: Any, owner: type[Any]) -> Any:
        if instance is None:
            return self
        build = self.build

        @functools.wraps(build)
        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return instance.run(build(*args, **kwargs))

        return method

    def __call__(self, client: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Called on the class, as an unbound method is: ``Client.health(client)``."""
        return self.__get__(client, type(client))(*args, **kwargs)


class group_endpoint(Generic[P, T]):  # noqa: N801 - used as a decorator-like descriptor
    """A group handle's method: ``build`` with the group's topic and name filled in."""

    def __init__(self, build: Callable[Concatenate[str, str, P], Call[T]]) -> None:
        self.build = build
        self.__doc__ = build.__doc__

    @overload
    def __get__(self, instance: None, owner: type[Any]) -> group_endpoint[P, T]: ...

    @overload
    def __get__(self, instance: AsyncGroup, owner: type[Any]) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, instance: SyncGroup, owner: type[Any]) -> Callable[P, T]: ...

    def __get__(self, instance: Any, owner: type[Any]) -> Any:
        if instance is None:
            return self
        build = self.build

        @functools.wraps(build)
        def method(*args: P.args, **kwargs: P.kwargs) -> Any:
            return instance.client.run(build(instance.topic, instance.name, *args, **kwargs))

        return method

    def __call__(self, group: Any, /, *args: P.args, **kwargs: P.kwargs) -> Any:
        """Called on the class, as an unbound method is: ``Group.info(group)``."""
        return self.__get__(group, type(group))(*args, **kwargs)


class Endpoints:
    """The client methods that are one call each, shared by both clients."""

    health = endpoint(_calls.health)
    metrics = endpoint(_calls.metrics)
    openapi = endpoint(_calls.openapi)
    issue_ticket = endpoint(_calls.issue_ticket)

    # Topics.
    create_topic = endpoint(_calls.create_topic)
    change_retention = endpoint(_calls.change_retention)
    list_topics = endpoint(_calls.list_topics)
    topic_info = endpoint(_calls.topic_info)
    delete_topic = endpoint(_calls.delete_topic)
    publish = endpoint(_calls.publish)
    publish_once = endpoint(_calls.publish_once)
    publish_batch = endpoint(_calls.publish_batch)
    publish_batch_once = endpoint(_calls.publish_batch_once)
    recover_topic = endpoint(_calls.recover_topic)
    repair_topic = endpoint(_calls.repair_topic)
    read = endpoint(reads.read_messages)

    # Groups.
    create_group = endpoint(_calls.create_group)
    group_info = endpoint(_calls.group_info)
    delete_group = endpoint(_calls.delete_group)
    seek = endpoint(_calls.seek)
    seek_to_time = endpoint(reads.seek_to_time)
    pause = endpoint(_calls.pause)
    resume = endpoint(_calls.resume)
    poll = endpoint(_calls.poll)
    poll_raw = endpoint(_calls.poll_raw)
    poll_batch = endpoint(_calls.poll_batch)
    ack = endpoint(_calls.ack)
    nack = endpoint(_calls.nack)
    touch = endpoint(_calls.touch)
    ack_batch = endpoint(_calls.ack_batch)
    nack_batch = endpoint(_calls.nack_batch)
    dead_letters_page = endpoint(_calls.dead_letters_page)
    redrive = endpoint(_calls.redrive)
    purge = endpoint(_calls.purge)

    # Live channels.
    create_channel = endpoint(_calls.create_channel)
    list_channels = endpoint(_calls.list_channels)
    channel_info = endpoint(_calls.channel_info)
    close_channel = endpoint(_calls.close_channel)
    publish_channel = endpoint(_calls.publish_channel)


class GroupEndpoints:
    """A group handle's methods that are one call each, shared by both clients."""

    info = group_endpoint(_calls.group_info)
    poll = group_endpoint(_calls.poll)
    poll_batch = group_endpoint(_calls.poll_batch)
    ack = group_endpoint(_calls.ack)
    nack = group_endpoint(_calls.nack)
    touch = group_endpoint(_calls.touch)
    seek = group_endpoint(_calls.seek)
    pause = group_endpoint(_calls.pause)
    resume = group_endpoint(_calls.resume)
