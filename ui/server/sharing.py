"""One engine for every connection: answers go through the engine's continuous-batching
:class:`~quicksilver.engine.scheduler.Scheduler`, so turns from all clients wait in one
first-come-first-served queue and those denoising at the same time share each forward
pass, instead of threads racing for the cores. A routed engine's
:class:`~quicksilver.engine.routing.RoutedScheduler` (``scheduler_for`` picks it) routes each
turn as it is submitted and keeps one such queue per model.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from quicksilver.engine import DenoiseFrame
from quicksilver.engine.routing import RoutedScheduler
from quicksilver.engine.scheduler import Scheduler
from quicksilver.engine.tokenizer import Conversation


class ScheduledEngine:
    """The engine as a connection's session sees it. :meth:`stream` is the engine's,
    through the scheduler; everything else (the tokenizer, the date sentence, the
    default sampler) is the shared engine's own."""

    def __init__(self, scheduler: Scheduler | RoutedScheduler) -> None:
        self.scheduler = scheduler

    def stream(self, conversation: Conversation, **options: Any) -> Iterator[DenoiseFrame]:
        """Frames as :meth:`Engine.stream <quicksilver.engine.Engine.stream>` gives them;
        closing the iterator (a cancelled turn) frees the conversation's row at once."""
        handle = self.scheduler.submit(conversation, **options)
        try:
            yield from handle.frames()
        finally:
            handle.cancel()  # no effect once answered

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scheduler.engine, name)
