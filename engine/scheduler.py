"""Continuous batching: many conversations share one engine, one forward pass a step.

A :class:`Scheduler` keeps a batch of reply canvases running (an
:class:`~engine.sampler.Canvases` per distinct sampler setting) and, at every step
boundary, retires the rows that finished, drops the ones cancelled, admits waiting
conversations first come first served up to ``max_batch`` rows, then runs one pass for
every row. Each row is at its own step; a greedy answer is what
:meth:`Engine.answer <engine.api.Engine.answer>` gives alone (in the prompt cache modes
that are exact alone, see :class:`~engine.sampler.Canvases`).

Thread-safe: any thread (or an asyncio loop) may submit, read and cancel, while one
worker thread runs the passes::

    with Scheduler(engine, max_batch=16) as scheduler:
        handle = scheduler.submit(messages, steps=16)   # bad input raises here
        for frame in handle.frames():                  # blocks; ends with the answer
            show(frame.text)
        # or: answer = handle.result(); or: async for frame in handle: ...
        handle.cancel()                                # from any thread, any time

Tests and benchmarks can instead drive it step by step from one thread
(``Scheduler(engine, start=False)``, then :meth:`Scheduler.step`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import CancelledError
from types import TracebackType

import torch

from .api import Answer, DenoiseFrame, Engine, Prepared
from .sampler import Canvases, SamplerConfig
from .tokenizer import Conversation

log = logging.getLogger(__name__)

_END = object()  # put on a handle's frame queue when it will get no more frames


class Handle:
    """One submitted conversation: its frames, its answer, its cancellation.

    ``frames()`` and ``result()`` block the calling thread; ``async for frame in
    handle`` and ``await handle.answer()`` do the same for asyncio code. A handle's
    frames carry its :attr:`id` as ``frame.conversation``.
    """

    def __init__(self, scheduler: Scheduler, id: int, request: Prepared, drafts: bool) -> None:
        self.id = id
        self.request = request
        self.drafts = drafts
        self._scheduler = scheduler
        self._frames: queue.Queue = queue.Queue()
        self._done = threading.Event()
        self._answer: Answer | None = None
        self._error: BaseException | None = None
        self.cancelled = False

    @property
    def done(self) -> bool:
        """Answered, cancelled or failed."""
        return self._done.is_set()

    def cancel(self) -> None:
        """Stop this conversation: a waiting one leaves the queue now, a running one's
        row is freed at the next step boundary (before the next pass), so a waiting
        conversation can take it there. Readers stop; :meth:`result` raises
        :class:`concurrent.futures.CancelledError`. No effect once done."""
        self._scheduler._cancel(self)

    def frames(self, timeout: float | None = None) -> Iterator[DenoiseFrame]:
        """This conversation's frames as they come (only the last, which holds the
        answer, if submitted with ``drafts=False``); ends after the answer or on
        cancellation, raises what failed. ``timeout``: seconds to wait for each frame
        (``queue.Empty`` past it)."""
        while True:
            frame = self._frames.get(timeout=timeout)
            if frame is _END:
                self._frames.put(_END)  # later readers end too
                if self._error is not None:
                    raise self._error
                return
            yield frame

    def result(self, timeout: float | None = None) -> Answer:
        """Block until the answer (``TimeoutError`` past ``timeout`` seconds)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"conversation {self.id} has no answer after {timeout} s")
        if self._error is not None:
            raise self._error
        if self.cancelled:
            raise CancelledError(f"conversation {self.id} was cancelled")
        return self._answer

    async def answer(self) -> Answer:
        """:meth:`result` for asyncio code (waits in the loop's default executor)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.result)

    async def __aiter__(self) -> AsyncIterator[DenoiseFrame]:
        loop = asyncio.get_running_loop()
        frames = self.frames()
        while True:
            frame = await loop.run_in_executor(None, next, frames, _END)
            if frame is _END:
                return
            yield frame

    # Called by the scheduler (under its lock or on its worker thread).
    def _deliver(self, frame: DenoiseFrame) -> None:
        if frame.answer is not None:
            self._answer = frame.answer
        if self.drafts or frame.answer is not None:
            self._frames.put(frame)
        if frame.answer is not None:
            self._close()

    def _close(self, error: BaseException | None = None) -> None:
        self._error = error
        self._done.set()
        self._frames.put(_END)


class Scheduler:
    """Continuous batching over one :class:`~engine.api.Engine` (see the module doc).

    ``max_batch`` bounds the rows denoised together (all settings counted); more
    conversations wait in one first-come-first-served queue. Conversations with
    different sampler settings (other than ``seed``) run in separate batches, one pass
    each per step. ``start=False``: no worker thread; call :meth:`step` yourself.
    """

    def __init__(self, engine: Engine, max_batch: int = 8, *, start: bool = True) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.engine = engine
        self.max_batch = max_batch
        self.passes = 0  # forward passes run so far, all batches together
        self._lock = threading.Condition()
        self._waiting: deque[Handle] = deque()
        self._running: dict[int, Handle] = {}
        self._batches: dict[SamplerConfig, Canvases] = {}
        self._cancelled: list[Handle] = []
        self._ids = itertools.count()
        self._closed = False
        self._worker: threading.Thread | None = None
        if start:
            self._worker = threading.Thread(target=self._run, name="engine-scheduler", daemon=True)
            self._worker.start()

    def submit(self, conversation: Conversation, *, drafts: bool = True, **options) -> Handle:
        """Queue a conversation; ``options`` are :class:`SamplerConfig` overrides as for
        :meth:`Engine.answer`. Bad input raises ``ValueError`` here. ``drafts=False``:
        the handle gets only the final frame."""
        request = self.engine.prepare(conversation, **options)
        with self._lock:
            if self._closed:
                raise RuntimeError("the scheduler is closed; make a new one")
            handle = Handle(self, next(self._ids), request, drafts)
            self._waiting.append(handle)
            self._lock.notify_all()
        return handle

    @property
    def running(self) -> int:
        """Rows in the batch now."""
        with self._lock:
            return len(self._running)

    @property
    def waiting(self) -> int:
        """Conversations queued for a row."""
        with self._lock:
            return len(self._waiting)

    def step(self) -> bool:
        """One step boundary and pass: drop cancelled rows, admit waiting conversations
        (first come, first served, up to ``max_batch``), run one pass for every batch,
        hand out frames and retire finished rows. False when there was nothing to do."""
        with torch.inference_mode():  # the batch's tensors are inference tensors
            with self._lock:
                for handle in self._cancelled:
                    self._drop(handle)
                self._cancelled.clear()
                admitted = []
                while self._waiting and len(self._running) < self.max_batch:
                    handle = self._waiting.popleft()
                    self._running[handle.id] = handle
                    admitted.append(handle)
                batches = list(self._batches.items())
            for handle in admitted:
                batches = self._admit(handle, batches)
            for config, canvases in batches:
                self._pass(config, canvases)
        return bool(batches)

    def close(self) -> None:
        """Cancel everything still waiting or running and stop the worker."""
        with self._lock:
            self._closed = True
            pending = [*self._waiting, *self._running.values()]
            self._lock.notify_all()
        for handle in pending:
            handle.cancel()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join()

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(
        self, kind: type | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ the worker's parts

    def _run(self) -> None:
        while True:
            with self._lock:
                while not (self._closed or self._waiting or self._running or self._cancelled):
                    self._lock.wait()
                if self._closed and not self._running and not self._cancelled:
                    return
            try:
                self.step()
            except Exception as error:  # a failed pass fails its rows, not the server
                log.exception("a denoising pass failed")
                self._fail_all(error)

    def _admit(
        self, handle: Handle, batches: list[tuple[SamplerConfig, Canvases]]
    ) -> list[tuple[SamplerConfig, Canvases]]:
        config = handle.request.config
        key = dataclasses.replace(config, seed=0)
        canvases = self._batches.get(key)
        if canvases is None:
            canvases = self._batches[key] = self.engine.canvases(key)
            batches = [*batches, (key, canvases)]
        ids = torch.tensor(handle.request.prompt_ids, dtype=torch.long)
        canvases.add(handle.id, ids, seed=config.seed)
        return batches

    def _pass(self, key: SamplerConfig, canvases: Canvases) -> None:
        try:
            states = canvases.step()
        except Exception as error:
            self._fail(canvases, error)
            return
        self.passes += 1
        for state in states:
            with self._lock:
                handle = self._running.get(state.key)
            if handle is None or handle.cancelled:
                continue
            if state.finished or handle.drafts:
                handle._deliver(self.engine.frame(state, handle.request, handle.id))
            if state.finished:
                with self._lock:
                    self._running.pop(handle.id, None)
        if not canvases:
            with self._lock:
                self._batches.pop(key, None)

    def _cancel(self, handle: Handle) -> None:
        with self._lock:
            if handle.done:
                return
            handle.cancelled = True
            if handle in self._waiting:
                self._waiting.remove(handle)
            else:
                self._cancelled.append(handle)  # its row goes at the next boundary
            self._lock.notify_all()
        handle._close()

    def _drop(self, handle: Handle) -> None:
        """Free a cancelled row (called under the lock, between passes)."""
        self._running.pop(handle.id, None)
        for key, canvases in list(self._batches.items()):
            canvases.remove([handle.id])
            if not canvases:
                del self._batches[key]

    def _fail(self, canvases: Canvases, error: BaseException) -> None:
        with self._lock:
            handles = [self._running.pop(k) for k in canvases.keys if k in self._running]
            for key, batch in list(self._batches.items()):
                if batch is canvases:
                    del self._batches[key]
        for handle in handles:
            handle._close(error)

    def _fail_all(self, error: BaseException) -> None:
        for canvases in list(self._batches.values()):
            self._fail(canvases, error)
