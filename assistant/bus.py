"""Fan-out of session events to every consumer: async iterators and plain callbacks.

The command line, the Textual app, the websocket server and the tests each read the
whole stream at their own pace, so every subscriber gets its own unbounded queue; a
slow reader delays only itself. Publishing happens on the session's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from quicksilver.assistant.events import Event

Callback = Callable[[Event], None]
log = logging.getLogger(__name__)


class Subscription:
    """``async for event in subscription``: every event from now until the session ends."""

    def __init__(self, bus: EventBus) -> None:
        self._bus = bus
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def _put(self, event: Event | None) -> None:
        self._queue.put_nowait(event)

    async def get(self) -> Event | None:
        """The next event; None once the session has ended."""
        return await self._queue.get()

    def close(self) -> None:
        self._bus._subscriptions.discard(self)
        self._put(None)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        while (event := await self._queue.get()) is not None:
            yield event


class EventBus:
    """Delivers each published event to all subscriptions and callbacks, in order."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()
        self._callbacks: list[Callback] = []

    def subscribe(self) -> Subscription:
        subscription = Subscription(self)
        self._subscriptions.add(subscription)
        return subscription

    def add_callback(self, callback: Callback) -> None:
        """Call ``callback(event)`` on the event loop for every event; it must not block."""
        self._callbacks.append(callback)

    def publish(self, event: Event) -> None:
        for subscription in self._subscriptions:
            subscription._put(event)
        for callback in self._callbacks:
            try:
                callback(event)
            except Exception:  # a broken consumer must not stop the conversation
                log.exception("event callback %r failed on %s", callback, event.type)

    def close(self) -> None:
        """End every subscription's iteration (the session is over)."""
        for subscription in list(self._subscriptions):
            subscription.close()
