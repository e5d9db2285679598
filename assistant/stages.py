"""The turn pipeline's stages: transcribe → think → speak, one small object each.

Every turn, spoken, typed or read from a file, goes through the same stages, so every
turn emits the same events from its transcript on. A stage does one job on a typed
input and wraps any failure in :class:`StageFailed`, which names the stage and says
what the user can do; the session turns it into an ``Error`` event and goes on.
Blocking work (Whisper, the engine, Piper, the speaker) runs in worker threads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date

import numpy as np
from quicksilver.assistant.memory import Memory
from quicksilver.assistant.playback import AudioOutput, Playback
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import SpeechChunk, Voice, spoken_pieces
from quicksilver.engine import MASK_GLYPH, Answer, DenoiseFrame, Engine

NO_ANSWER = "Sorry, I couldn't work that out. Could you ask it another way?"
# Said in place of an answer the model was not sure of. Below the shipped model's
# threshold most answers are wrong (184 of 213 on its held-out card questions), so its
# guess is not said, even hedged; asking another way often helps a model this sensitive
# to wording. The guess still reaches the screen and the transcript (``withheld``).
UNSURE = "I'm not sure about that one. Could you ask it another way?"


class StageFailed(Exception):
    """``stage`` failed on this turn; ``hint`` is what the user can do about it."""

    def __init__(self, stage: str, hint: str, error: BaseException) -> None:
        super().__init__(str(error) or repr(error))
        self.stage = stage
        self.hint = hint


class Stage:
    """A named step of the pipeline; :meth:`failed` wraps an error in its name and hint."""

    name = ""
    hint = ""

    def failed(self, error: BaseException) -> StageFailed:
        return StageFailed(self.name, self.hint, error)


class Transcribe(Stage):
    """Speech (16 kHz mono) → the words in it, with Whisper; one call at a time."""

    name = "transcribe"
    hint = "Whisper failed on this utterance; say it again, or choose another whisper_model"

    def __init__(self, transcriber: Transcriber) -> None:
        self.transcriber = transcriber
        self.running = 0  # calls in flight: a partial waits for an idle Whisper

    async def __call__(self, audio: np.ndarray) -> str:
        self.running += 1
        try:
            text = await asyncio.to_thread(self.transcriber.transcribe, audio, speech_checked=True)
        except Exception as error:
            raise self.failed(error) from error
        finally:
            self.running -= 1
        return text.strip()


class Think(Stage):
    """A question → the engine's :class:`Answer`, its drafts streamed as they come.

    The question goes to the engine with the remembered conversation and the date
    sentence the model reads (if it reads one). It returns the model's answer as written;
    :func:`spoken_answer` decides what is said, with :meth:`unsure_threshold`.
    """

    name = "think"
    hint = (
        "the engine could not answer this question; ask again more briefly, or choose another model"
    )

    def __init__(
        self, engine: Engine, memory: Memory, today: Callable[[], date] = date.today
    ) -> None:
        self.engine = engine
        self.memory = memory
        self.today = today
        self.steps: int | None = None  # None: the model's own default
        self.instructions: str | None = None  # added to the system message
        self.unsure_below: float | None = None  # None: the model's own threshold

    def __call__(
        self,
        question: str,
        cancelled: threading.Event,
        on_draft: Callable[[DenoiseFrame, float], None],
    ) -> Answer | None:
        """Blocking (run it in a thread); ``None`` when ``cancelled`` stopped it.
        ``on_draft(frame, step_ms)`` hears every step and how long it took."""
        options = {} if self.steps is None else {"steps": self.steps}
        try:
            messages = self.memory.messages(question, self.system())
            frames = self.engine.stream(messages, **options)
            started = time.perf_counter()
            for frame in frames:
                if cancelled.is_set():
                    frames.close()
                    return None
                now = time.perf_counter()
                on_draft(frame, (now - started) * 1000)
                started = now
                if frame.answer is not None:
                    return frame.answer
        except Exception as error:
            raise self.failed(error) from error
        return None

    def unsure_threshold(self) -> float | None:
        """:func:`unsure_threshold` for this stage's engine and setting."""
        return unsure_threshold(self.engine, self.unsure_below)

    def system(self) -> str | None:
        """The system message: the date sentence the model reads (if it reads one),
        then the instructions (if any)."""
        parts = (self.engine.date_context(self.today()), self.instructions)
        return "\n".join(part for part in parts if part) or None


def unsure_threshold(engine: Engine, setting: float | None) -> float | None:
    """The confidence under which an answer is not said: the setting, else the model's own
    (``Engine.unsure_below``; None for a model that has none: never)."""
    return engine.unsure_below if setting is None else setting


def spoken_answer(answer: Answer, unsure_below: float | None = None) -> Answer:
    """``answer`` as it is said: :data:`NO_ANSWER` in its place when the model wrote no
    spoken words, :data:`UNSURE` when its ``confidence`` is below ``unsure_below``.

    A small model can settle its whole canvas as reasoning and padding. Left as it is, the
    user would hear nothing and see an empty reply; a spoken apology asks them to go on.
    An answer the model was unsure of is more often wrong than right: an honest "I'm not
    sure" is better than a wrong answer said with confidence.
    """
    if not answer.text.strip():
        return dataclasses.replace(answer, text=NO_ANSWER)
    if unsure_below is not None and answer.confidence < unsure_below:
        return dataclasses.replace(answer, text=UNSURE)
    return answer


def settled_first_piece(draft: str) -> str | None:
    """The piece a spoken answer will begin with, once the denoising has settled it.

    Committed tokens are never remasked, so the draft's text up to its first masked
    position is final; once it holds a whole first piece (another piece begins after it,
    or nothing is masked), that piece can be synthesised before the last step. ``None``
    until then. It is a guess in one case, an answer marker committed earlier in the
    canvas later on, so :meth:`Speak.prepare` checks it against the finished answer.
    """
    settled, masked, _ = draft.partition(MASK_GLYPH)
    pieces = spoken_pieces(settled)
    if pieces and (len(pieces) > 1 or not masked):
        return pieces[0]
    return None


@dataclass(eq=False)
class Rehearsal:
    """An answer's first piece, synthesised while the engine finishes the rest."""

    piece: str
    chunk: asyncio.Future[SpeechChunk | None]


@dataclass(eq=False)
class Speech:
    """One answer being spoken: its sentences' audio, and what reached the speaker."""

    text: str
    chunks: Iterator[SpeechChunk]
    first: SpeechChunk | None  # synthesised ahead, before playback may begin
    playback: Playback | None = None  # set once the first chunk is queued
    rehearsed: bool = False  # the first piece was synthesised before the answer was final

    def heard(self, played_s: float) -> tuple[str, str]:
        """``(spoken, dropped)`` words after a stop at the speaker's ``played_s``."""
        if self.playback is None:
            return "", self.text
        return self.playback.heard(played_s)


class Speak(Stage):
    """Answer text → sound on the output, sentence by sentence; returns the words said."""

    name = "speak"
    hint = (
        "the answer could not be spoken (it is shown as text); check the voice and the "
        "output_device (`quicksilver devices` lists them)"
    )

    def __init__(self, voice: Voice, output: AudioOutput) -> None:
        if output.sample_rate != voice.sample_rate:
            raise ValueError(
                f"the output plays at {output.sample_rate} Hz but the voice speaks at "
                f"{voice.sample_rate} Hz; open it with sample_rate=voice.sample_rate"
            )
        self.voice = voice
        self.output = output

    def rehearse(self, piece: str) -> Rehearsal:
        """Start synthesising ``piece`` (a :func:`settled_first_piece`) in a worker thread."""
        chunks = self.voice.synthesize_pieces([piece])
        return Rehearsal(piece, asyncio.ensure_future(asyncio.to_thread(next, chunks, None)))

    async def prepare(self, text: str, rehearsal: Rehearsal | None = None) -> Speech:
        """Start synthesising; the first sentence is ready when this returns. A
        ``rehearsal`` of the piece ``text`` begins with is used, not made again."""
        try:
            pieces = spoken_pieces(text)
            rehearsed = rehearsal is not None and pieces[:1] == [rehearsal.piece]
            chunks = self.voice.synthesize_pieces(pieces[1:] if rehearsed else pieces)
            first = await rehearsal.chunk if rehearsed else None
            if first is None:
                first = await asyncio.to_thread(next, chunks, None)
        except Exception as error:
            raise self.failed(error) from error
        return Speech(text, chunks, first, rehearsed=rehearsed)

    async def play(self, speech: Speech, on_start: Callable[[], None]) -> str:
        """Queue every sentence as it is synthesised, wait for the end; the words said.

        ``on_start`` runs just before the first sound is queued.
        """
        try:
            chunk = speech.first
            while chunk is not None:
                if speech.playback is None:
                    on_start()
                    speech.playback = Playback(speech.text, start_s=self.output.played_s)
                self.output.play(chunk.samples)
                speech.playback.queued(chunk.text, chunk.duration_s)
                chunk = await asyncio.to_thread(next, speech.chunks, None)
            if speech.playback is None:
                return ""
            await asyncio.to_thread(self.output.wait)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise self.failed(error) from error
        return " ".join(piece for piece, _ in speech.playback.chunks)

    def stop(self, speech: Speech) -> tuple[str, str]:
        """Silence the output now; ``(spoken, dropped)`` words of ``speech``."""
        return speech.heard(self.output.stop())
