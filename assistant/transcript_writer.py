"""The transcript log as a subscriber of the session's events.

Each :class:`TurnCompleted` is appended (and fsynced) by one writer thread, in the
order the turns completed, without holding up the conversation; a failed write comes
back to the session as an ``Error`` event, once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from quicksilver.assistant.events import Error, Event, TurnCompleted
from quicksilver.assistant.transcript import LogFailure, TranscriptLog


class TranscriptWriter:
    """``session.subscribe(TranscriptWriter(log, session.report))``."""

    def __init__(self, log: TranscriptLog, report: Callable[[Event], None]) -> None:
        self.log = log
        self.report = report
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quicksilver-log")

    def __call__(self, event: Event) -> None:
        if not isinstance(event, TurnCompleted):
            return
        written = asyncio.get_running_loop().run_in_executor(
            self._thread, self.log.append, event.record
        )
        written.add_done_callback(lambda done: self._check(event.turn, done))

    def _check(self, turn: int, done: asyncio.Future[LogFailure | None]) -> None:
        if done.cancelled():
            return
        failure = done.result()
        if failure is not None:
            self.report(Error(turn, "log", failure.message, failure.hint))
