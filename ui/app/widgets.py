"""The app's widgets: each renders part of the session's event stream, nothing more.

Colours and emphasis come from ``app.tcss`` (component classes), never from Python, so
the dark and light themes both read well.
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

from quicksilver.assistant.events import (
    AnswerReady,
    AudioLevel,
    Denoise,
    TurnMetrics,
)
from quicksilver.assistant.wiring import Progress
from quicksilver.engine import MASK_GLYPH
from rich.text import Text
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

FRAME_S = 1 / 30  # the canvas shows one draft per frame, so every step is seen


class UserMessage(Static):
    """What the user said or typed; ``partial`` while they are still speaking."""

    def __init__(self, text: str, partial: bool = False) -> None:
        super().__init__(text, classes="partial" if partial else "")

    def finish(self, text: str) -> None:
        self.remove_class("partial")
        self.update(text or "(no words heard)")


class AssistantMessage(Static):
    """An answer; an interrupted one keeps only what was heard, and says so."""

    def __init__(self, text: str, thinking: str = "") -> None:
        super().__init__(text)
        self.text = text
        self.thinking = thinking

    def interrupt(self, spoken: str) -> None:
        self.add_class("interrupted")
        self.update(f"{spoken} — interrupted" if spoken else "(interrupted before a word)")


class WithheldAnswer(Static):
    """The model's own answer to a turn, not said because it was too unsure of it: shown
    dim under what was said ("I'm not sure..."), with its confidence, so the person at the
    screen sees why. Booth mode hides it (``app.tcss``)."""

    def __init__(self, text: str, confidence: float | None) -> None:
        sure = "" if confidence is None else f", confidence {confidence_label(confidence)}"
        super().__init__(f"not said{sure}: {text}", markup=False)
        self.text = text


def confidence_label(confidence: float) -> str:
    """``confidence`` to two places, rounded down: an answer withheld below 0.92 never
    reads as 0.92."""
    return f"{math.floor(confidence * 100) / 100:.2f}"


class Conversation(VerticalScroll):
    """The turns so far, newest at the bottom, kept in view as they come."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._partial: UserMessage | None = None
        self._answers: dict[int, AssistantMessage] = {}

    def partial(self, text: str) -> None:
        if self._partial is None:
            self._partial = UserMessage(text, partial=True)
            self._add(self._partial)
        else:
            self._partial.update(text)

    def question(self, text: str) -> None:
        if self._partial is not None:
            self._partial.finish(text)
            self._partial = None
        else:
            self._add(UserMessage(text or "(no words heard)"))

    def answer(
        self, turn: int, text: str, thinking: str, withheld: str = "",
        confidence: float | None = None,
    ) -> None:  # fmt: skip
        """What was said; under it, the model's own answer when it was withheld."""
        message = AssistantMessage(text, thinking)
        self._answers[turn] = message
        self._add(message)
        if withheld:
            self._add(WithheldAnswer(withheld, confidence))

    def interrupted(self, turn: int, spoken: str) -> None:
        """Mark the turn's answer, shown or (cut off while forming) not yet."""
        if turn not in self._answers:
            self.answer(turn, "", "")
        self._answers[turn].interrupt(spoken)

    def note(self, text: str, kind: str = "note") -> None:
        self._add(Static(text, classes=kind))

    def reset(self) -> None:
        self._partial = None
        self._answers.clear()
        self.remove_children()

    def _add(self, widget: Static) -> None:
        self.mount(widget)
        self.scroll_end(animate=False)


@dataclass(frozen=True)
class Draft:
    """One step as the canvas shows it."""

    turn: int
    step: int
    total_steps: int
    thinking: str
    text: str
    step_ms: float


class DenoiseCanvas(Static):
    """The answer forming, step by step: masked positions as dim placeholders resolving
    into text, the step counter and the step's time; the reasoning dim and folded.

    Drafts arrive as fast as the engine makes them (a few ms a step on the shipped
    model); the canvas plays them back one per frame, so at 16 steps a visitor sees 16
    frames, and hands the answer on (:class:`DenoiseCanvas.Settled`) after the last.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "canvas--masked",
        "canvas--thinking",
        "canvas--counter",
    }

    class Settled(Message):
        """The canvas has shown every step of ``answer``'s turn."""

        def __init__(self, answer: AnswerReady) -> None:
            super().__init__()
            self.answer = answer

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.show_thinking = False
        self.frames_drawn: dict[int, int] = {}  # turn -> drafts shown, for the curious
        self._queue: deque[Draft | AnswerReady] = deque()
        self._current: Draft | None = None
        self._lines = 0  # lines of the draft last drawn

    def on_mount(self) -> None:
        self.set_interval(FRAME_S, self._next_frame)

    def add_step(self, event: Denoise) -> None:
        self._queue.append(
            Draft(event.turn, event.step, event.total_steps, event.thinking, event.text,
                  event.step_ms)
        )  # fmt: skip

    def add_answer(self, event: AnswerReady) -> None:
        self._queue.append(event)

    def clear(self) -> None:
        """Drop what is queued (the turn was cancelled or the conversation reset)."""
        self._queue.clear()
        self._current = None
        self.remove_class("busy")
        self.update("")

    def toggle_thinking(self) -> None:
        self.show_thinking = not self.show_thinking
        self._draw()

    def _next_frame(self) -> None:
        if not self._queue:
            return
        item = self._queue.popleft()
        if isinstance(item, AnswerReady):
            self._current = None
            self.remove_class("busy")
            self.update("")
            self.post_message(self.Settled(item))
            return
        self._current = item
        self.frames_drawn[item.turn] = self.frames_drawn.get(item.turn, 0) + 1
        self.add_class("busy")
        self._draw()

    def _draw(self) -> None:
        draft = self._current
        if draft is None:
            return
        masked = self.get_component_rich_style("canvas--masked")
        text = Text("step ")
        counter = self.get_component_rich_style("canvas--counter")
        text.append(f"{draft.step}/{draft.total_steps}", counter)
        text.append(f" · {draft.step_ms:.1f} ms\n")
        if draft.thinking:
            thinking = self.get_component_rich_style("canvas--thinking")
            if self.show_thinking:
                text.append_text(_with_masks(draft.thinking, thinking, masked + thinking))
                text.append("\n")
            else:
                text.append("(reasoning hidden: r shows it)\n", thinking)
        text.append_text(_with_masks(draft.text, None, masked))
        # the screen's layout is redone only when the draft's shape changes, not per step
        lines = len(text.wrap(self.app.console, max(self.content_size.width, 1)))
        self.update(text, layout=lines != self._lines)
        self._lines = lines


def _with_masks(draft: str, style, masked_style) -> Text:
    """``draft`` with each run of mask glyphs in ``masked_style``."""
    text = Text(style=style or "")
    for char in draft:
        text.append(char, masked_style if char == MASK_GLYPH else None)
    return text


class StatusBar(Static):
    """What the assistant is doing, the microphone level, the parts in use and the last
    turn's latency and answer confidence."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"status--state", "status--meter"}

    def __init__(self, parts: str, microphone: bool, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.parts = parts
        self.microphone = microphone
        self.state = "starting"
        self.level = 0.0
        self.latency = ""
        self._confidence: tuple[int, float | None] = (0, None)  # the last answer's

    def set_state(self, state: str) -> None:
        self.state = state
        self._draw()

    def set_parts(self, parts: str, microphone: bool) -> None:
        self.parts, self.microphone = parts, microphone
        self._draw()

    def set_level(self, event: AudioLevel) -> None:
        self.level = event.rms
        self._draw()

    def set_confidence(self, answer: AnswerReady) -> None:
        """Kept until the turn's figures come (:meth:`set_latency`), shown beside them."""
        self._confidence = (answer.turn, answer.confidence)

    def set_latency(self, metrics: TurnMetrics) -> None:
        parts = [
            (label, value)
            for label, value in (
                ("transcript", metrics.transcript_ms),
                ("engine", metrics.engine_ms),
                ("first audio", metrics.first_audio_ms),
                ("voice to voice", metrics.voice_to_voice_ms),
            )
            if value is not None
        ]
        figures = [f"{label} {value:.0f} ms" for label, value in parts]
        turn, confidence = self._confidence
        if turn == metrics.turn and confidence is not None:
            figures.append(f"confidence {confidence_label(confidence)}")
        self.latency = " · ".join(figures)
        self._draw()

    def on_mount(self) -> None:
        self._draw()

    def _draw(self) -> None:
        text = Text()
        text.append(f" {self.state} ", self.get_component_rich_style("status--state"))
        if self.microphone:
            text.append(" mic ")
            text.append(level_meter(self.level), self.get_component_rich_style("status--meter"))
        text.append(f"  {self.parts}")
        if self.latency:
            text.append(f"  │ {self.latency}")
        self.update(text)


def level_meter(rms: float, width: int = 8) -> str:
    """A bar for a microphone level: about -60 dBFS empty, -10 dBFS full."""
    if rms <= 0:
        filled = 0
    else:
        db = 20 * math.log10(rms)
        filled = round(min(max((db + 60) / 50, 0.0), 1.0) * width)
    return "█" * filled + "·" * (width - filled)


class StartupPanel(Static):
    """Each part of the session as it loads: loading (with the seconds so far), ready,
    or failed with the reason; shown from the first paint, so there is no spinner."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"startup--ready", "startup--failed"}
    NAMES: ClassVar[dict[str, str]] = {
        "engine": "reasoning engine",
        "whisper": "speech recognition",
        "voice": "voice",
        "turn": "turn detection",
        "microphone": "microphone",
        "speaker": "speaker",
        "output": "output",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        # name -> (state, detail, when it began, when it ended)
        self.parts: dict[str, tuple[str, str, float, float | None]] = {}

    def on_mount(self) -> None:
        self.set_interval(0.25, self._draw)
        self._draw()

    def show(self, update: Progress) -> None:
        now = time.monotonic()
        began = self.parts.get(update.component, (None, None, now, None))[2]
        if update.state == "loading":
            self.parts[update.component] = (update.state, update.detail, now, None)
        else:
            self.parts[update.component] = (update.state, update.detail, began, now)
        self._draw()

    def _draw(self) -> None:
        text = Text("Starting Quicksilver\n\n")
        for component, (state, detail, began, ended) in self.parts.items():
            text.append(f"  {self.NAMES.get(component, component):<20} ")
            seconds = (ended or time.monotonic()) - began
            if state == "loading":
                text.append(f"loading… {seconds:.1f} s\n")
            elif state == "ready":
                text.append(f"ready ({seconds:.1f} s)\n", self._style("startup--ready"))
            else:
                label = "not available" if state == "fallback" else "failed"
                text.append(f"{label}: ", self._style("startup--failed"))
                text.append(f"{detail}\n")
        self.update(text)

    def _style(self, name: str):
        return self.get_component_rich_style(name)
