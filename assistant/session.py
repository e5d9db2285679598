"""The conversation loop: listen, endpoint, transcribe, denoise, speak, listen again.

One asyncio loop owns the turn state; everything that blocks runs in worker threads:
the ear (:mod:`assistant.listener`) reads the microphone and runs the VAD, Whisper, the
engine and Piper run through ``asyncio.to_thread``, and the speaker plays from its own
PortAudio callback. Whatever happens is published as an :mod:`assistant.events` event.

Each piece of turn work (a :class:`_Work`) belongs to one turn id; when the user goes
on speaking or barges in, that work is cancelled and whatever it still delivers is
dropped because it is no longer the session's current work, not by draining queues.
The engine checks the cancellation between denoising steps, so dropped work stops
costing CPU within one step.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
from quicksilver.assistant.bus import Callback, EventBus, Subscription
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    AudioLevel,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    Listening,
    PartialTranscript,
    SpeakingFinished,
    SpeakingStarted,
    SpeechStarted,
    TurnMetrics,
)
from quicksilver.assistant.listener import (
    Began,
    Ended,
    Failed,
    FrameSource,
    Growing,
    Level,
    ListenConfig,
    Listener,
    Paused,
    Resumed,
    Signal,
)
from quicksilver.assistant.memory import Memory
from quicksilver.assistant.playback import AudioOutput, Playback
from quicksilver.assistant.transcript import Source, TranscriptLog, TurnRecord, now_iso
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import SpeechChunk, Voice
from quicksilver.audio.vad import VadConfig, VoiceActivity
from quicksilver.engine import Answer, DenoiseFrame, Engine
from quicksilver.engine.normalise import normalise_spoken

log = logging.getLogger(__name__)

HINTS = {
    "transcribe": "Whisper failed on this utterance; say it again, or try another --whisper-model",
    "engine": "the engine could not answer this question; ask again more briefly, or try "
    "another --model",
    "speech": "Piper could not speak the answer (it is shown as text); check --voice",
    "speaker": "the speaker failed; check it with `quicksilver devices` or choose another "
    "--output-device",
    "microphone": "reconnect the microphone and start again, or type instead with "
    "`quicksilver --text`",
}

NO_ANSWER = "Sorry, I couldn't work that out. Could you ask it another way?"


def spoken_answer(answer: Answer) -> Answer:
    """``answer``, or :data:`NO_ANSWER` in its place when the model wrote no spoken words.

    A small model can settle its whole canvas as reasoning and padding. Left as it is, the
    user would hear nothing and see an empty reply; a spoken apology asks them to go on.
    """
    if answer.text.strip():
        return answer
    return dataclasses.replace(answer, text=NO_ANSWER)


@dataclass(frozen=True)
class SessionConfig:
    """How the loop behaves; :func:`SessionConfig.from_settings` maps the user's settings."""

    steps: int | None = None  # denoising steps (None: the checkpoint's default)
    headset: bool = False  # False: ignore the microphone while the assistant speaks
    vad: VadConfig = field(default_factory=VadConfig)
    listen: ListenConfig = field(default_factory=ListenConfig)

    @classmethod
    def from_settings(cls, settings: Settings) -> SessionConfig:
        return cls(
            steps=settings.steps,
            headset=settings.headset,
            vad=VadConfig(hangover_ms=settings.hangover_ms),
            listen=ListenConfig(speculative_ms=settings.speculative_ms or None),
        )


def engine_memory(engine: Engine, context_tokens: int | None = None, max_turns: int = 8) -> Memory:
    """A memory whose prompts always leave room for the engine's reply canvas.

    Each message counts as its text, raw or normalised as a spoken question (whichever is
    longer), plus the markup of a whole one-message prompt: a few tokens too many, so the
    prompt plus ``max_new_tokens`` never exceeds the model's context.
    """
    tokenizer = engine.tokenizer
    markup = len(tokenizer.prompt_ids("x")) - len(tokenizer.encode("x"))

    def count(text: str) -> int:
        if not text.strip():
            return 0
        return markup + max(len(tokenizer.encode(t)) for t in (text, normalise_spoken(text)))

    fits = engine.model.config.max_seq_len - engine.sampler.max_new_tokens
    budget = fits if context_tokens is None else min(context_tokens, fits)
    return Memory(count, budget, max_turns)


@dataclass(eq=False)
class _Work:
    """One attempt at answering a turn; a speculative attempt may be dropped and redone."""

    turn: int
    source: Source
    audio: np.ndarray | None = None
    transcript: str | None = None
    started_at: str = field(default_factory=now_iso)
    speculative: bool = False
    confirmed: bool = False  # the endpoint (or the typed line) says this is the question
    cancelled: threading.Event = field(default_factory=threading.Event)
    pending: list[Event] = field(default_factory=list)  # held back until confirmed
    answer: Answer | None = None
    speech: Iterator[SpeechChunk] | None = None  # the answer's audio, sentence by sentence
    first_chunk: SpeechChunk | None = None  # synthesised before playback may begin
    stage: str = "transcribe"
    playback: Playback | None = None
    recorded: bool = False
    tasks: list[asyncio.Task] = field(default_factory=list)
    # perf_counter times
    speech_ended: float | None = None
    endpoint: float | None = None
    transcribed: float | None = None
    answered: float | None = None
    first_audio: float | None = None

    def cancel(self) -> None:
        self.cancelled.set()
        for task in self.tasks:
            task.cancel()


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(end - start, 0.0) * 1000, 1)


def _retrieve(task: asyncio.Task) -> None:
    """Done-callback for dropped work: its outcome is of no interest to anyone."""
    if not task.cancelled():
        task.exception()


class Session:
    """A conversation with one user, by voice (:meth:`run_voice`) or typed (:meth:`run_text`).

    ``transcriber`` is needed for voice input; ``voice`` and ``speaker`` (at the voice's
    sample rate) for spoken answers, without them answers are text only. Completed turns
    go to ``memory`` (built on the engine's tokenizer when not given) and to ``log``.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        transcriber: Transcriber | None = None,
        voice: Voice | None = None,
        speaker: AudioOutput | None = None,
        memory: Memory | None = None,
        log: TranscriptLog | None = None,
        config: SessionConfig | None = None,
        today: Callable[[], date] = date.today,
    ) -> None:
        if speaker is not None and voice is not None and speaker.sample_rate != voice.sample_rate:
            raise ValueError(
                f"the speaker plays at {speaker.sample_rate} Hz but the voice speaks at "
                f"{voice.sample_rate} Hz; open the speaker with sample_rate=voice.sample_rate"
            )
        self.engine = engine
        self.transcriber = transcriber
        self.voice = voice
        self.speaker = speaker if voice is not None else None
        self.memory = memory or engine_memory(engine)
        self.log = log
        self.config = config or SessionConfig()
        self.today = today
        self.bus = EventBus()
        self.turn = 0  # id of the latest turn
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: Listener | None = None
        self._utterance: int | None = None  # turn of the utterance being spoken
        self._speculation: _Work | None = None  # started at a pause, not yet confirmed
        self._active: _Work | None = None  # confirmed, being answered or spoken
        self._whisper_calls = 0  # transcriptions running (Whisper serves them one by one)
        self._background: set[asyncio.Task] = set()

    # ------------------------------------------------------------------ consumers

    def subscribe(self) -> Subscription:
        """Every event from now on, as an async iterator."""
        return self.bus.subscribe()

    def add_callback(self, callback: Callback) -> None:
        """Call ``callback(event)`` on the event loop for every event; it must not block."""
        self.bus.add_callback(callback)

    def close(self) -> None:
        """End every subscription; the session is over."""
        self.bus.close()

    def _publish(self, event: Event) -> None:
        self.bus.publish(event)

    # ------------------------------------------------------------------ inputs

    async def run_text(self, lines: AsyncIterable[str]) -> None:
        """Answer typed lines one after the other until ``lines`` ends (or cancellation)."""
        self._loop = asyncio.get_running_loop()
        self._publish(Listening(self.turn))
        try:
            async for line in lines:
                if not line.strip():
                    continue
                self.turn += 1
                work = _Work(self.turn, "text", transcript=line.strip())
                self._start(work)
                self._confirm(work)
                await self._complete(work)
        finally:
            self._stop_everything()

    async def run_voice(self, source: FrameSource) -> None:
        """Converse through ``source`` (a microphone) until cancelled; closes ``source``.

        Raises :class:`audio.AudioDeviceError` (after an ``Error`` event) when the source
        stops delivering audio.
        """
        if self.transcriber is None:
            raise ValueError("voice input needs a transcriber: Session(..., transcriber=...)")
        self._loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[Signal] = asyncio.Queue()
        vad = VoiceActivity(self.config.vad)
        self._listener = Listener(source, vad, inbox, self._loop, self.config.listen)
        self._listener.start()
        self._publish(Listening(self.turn))
        try:
            while True:
                signal = await inbox.get()
                if isinstance(signal, Failed):
                    self._publish(
                        Error(self.turn, "microphone", str(signal.error), HINTS["microphone"])
                    )
                    raise signal.error
                await self._on_signal(signal)
        finally:
            self._listener.stop(timeout=0)
            try:
                source.close()
            finally:
                self._listener.stop()
                self._listener = None
                self._stop_everything()

    # ------------------------------------------------------------------ voice signals

    async def _on_signal(self, signal: Signal) -> None:
        if isinstance(signal, Level):
            self._publish(AudioLevel(self.turn, signal.rms, signal.speech_probability))
        elif isinstance(signal, Began):
            await self._barge_in()
            self._drop_speculation()
            self.turn += 1
            self._utterance = self.turn
            self._publish(SpeechStarted(self.turn))
        elif isinstance(signal, Growing):
            if self._utterance is not None and not self._whisper_calls:
                self._spawn(self._partial(self._utterance, signal.audio))
        elif isinstance(signal, Paused):
            if self._utterance is not None:
                work = _Work(self._utterance, "voice", audio=signal.audio, speculative=True)
                self._speculation = work
                self._start(work)
        elif isinstance(signal, Resumed):
            self._drop_speculation()
        elif isinstance(signal, Ended) and self._utterance is not None:
            work = self._speculation
            self._speculation = None
            if work is None:
                work = _Work(self._utterance, "voice", audio=signal.end.audio)
                self._start(work)
            self._utterance = None
            work.speech_ended, work.endpoint = signal.speech_ended, signal.detected
            self._confirm(work)
            work.tasks.append(self._spawn(self._complete(work)))

    async def _transcribe(self, audio: np.ndarray) -> str:
        self._whisper_calls += 1
        try:
            text = await asyncio.to_thread(self.transcriber.transcribe, audio, speech_checked=True)
        finally:
            self._whisper_calls -= 1
        return text.strip()

    async def _partial(self, turn: int, audio: np.ndarray) -> None:
        """A preview, only when Whisper is idle: a final transcript must never queue behind
        more than the one call already running."""
        try:
            text = await self._transcribe(audio)
        except Exception:  # the final transcript reports failures
            return
        if text and self._utterance == turn and self._speculation is None:
            self._publish(PartialTranscript(turn, text))

    def _drop_speculation(self) -> None:
        if self._speculation is not None:
            log.debug("turn %d: speculative answer dropped", self._speculation.turn)
            self._speculation.cancel()
            self._speculation = None

    async def _barge_in(self) -> None:
        """The user speaks over the current turn: stop it, keep what was heard."""
        work = self._active
        if work is None:
            return
        self._active = None
        spoken, dropped = "", work.answer.text if work.answer else ""
        if work.playback is not None and self.speaker is not None:
            spoken, dropped = work.playback.heard(self.speaker.stop())
        work.cancel()
        self._publish(Interrupted(work.turn, spoken, dropped))
        if work.transcript:
            await self._record(work, interrupted=True, spoken=spoken)

    # ------------------------------------------------------------------ one turn

    def _start(self, work: _Work) -> None:
        """Begin transcribing and denoising (perhaps before the endpoint confirms)."""
        task = self._spawn(self._prepare(work))
        task.add_done_callback(_retrieve)
        work.tasks.append(task)

    def _confirm(self, work: _Work) -> None:
        """This work answers the turn: publish what it held back and make it current."""
        work.confirmed = True
        self._active = work
        if work.transcript is not None:
            self._publish(FinalTranscript(work.turn, work.transcript))
        for event in work.pending:
            self._publish(event)
        work.pending.clear()

    def _emit(self, work: _Work, event: Event) -> None:
        """Publish ``work``'s event now if it is the turn's answer, else when confirmed."""
        if work.cancelled.is_set():
            return
        if work.confirmed:
            self._publish(event)
        else:
            work.pending.append(event)

    async def _prepare(self, work: _Work) -> Answer | None:
        """Transcript, answer and its first sentence of audio: all that can be done before
        the endpoint confirms the question."""
        if work.transcript is None:
            work.transcript = await self._transcribe(work.audio)
            work.transcribed = time.perf_counter()
            if work.confirmed:
                self._publish(FinalTranscript(work.turn, work.transcript))
        if not work.transcript:
            return None
        work.stage = "engine"
        messages = self.memory.messages(work.transcript, self.today())
        answer = await asyncio.to_thread(self._denoise, work, messages)
        work.answered = time.perf_counter()
        if answer is None:
            return None
        work.answer = answer
        engine_ms = round(answer.latency_s * 1000, 1)
        self._emit(
            work,
            AnswerReady(
                work.turn, answer.text, answer.thinking, answer.steps, answer.forward_passes,
                engine_ms,
            ),
        )  # fmt: skip
        if self.speaker is not None:
            work.stage = "speech"
            work.speech = self.voice.synthesize(answer.text)
            work.first_chunk = await asyncio.to_thread(next, work.speech, None)
        return answer

    def _denoise(self, work: _Work, messages: list[dict[str, str]]) -> Answer | None:
        """Worker thread: run the engine, posting every draft to the loop."""
        frames = self.engine.stream(messages, steps=self.config.steps)
        for frame in frames:
            if work.cancelled.is_set():
                frames.close()
                return None
            self._loop.call_soon_threadsafe(self._draft, work, frame)
            if frame.answer is not None:
                return spoken_answer(frame.answer)
        return None

    def _draft(self, work: _Work, frame: DenoiseFrame) -> None:
        self._emit(
            work,
            Denoise(
                work.turn, frame.step, frame.total_steps, frame.thinking, frame.text, frame.masked
            ),
        )

    async def _complete(self, work: _Work) -> None:
        """Wait for the answer, speak it, record the turn; errors become ``Error`` events."""
        try:
            await self._answer(work)
        except asyncio.CancelledError:
            if work.cancelled.is_set():  # barged in: the new utterance has the floor
                return
            raise
        except Exception as error:
            message = str(error) or repr(error)
            self._publish(Error(work.turn, work.stage, message, HINTS[work.stage]))
        finally:
            if self._listener is not None:
                self._listener.gated = False
        if self._active is work:
            self._active = None
        if self._utterance is None:
            self._publish(Listening(work.turn))

    async def _answer(self, work: _Work) -> None:
        if await work.tasks[0] is None:  # nothing was said (noise), or the work was dropped
            return
        spoken = await self._speak(work)
        if self._active is work:
            self._active = None  # from here on a new utterance is a new turn, not a barge-in
        await self._record(work, interrupted=False, spoken=spoken)

    async def _speak(self, work: _Work) -> str:
        """Synthesise sentence by sentence and play; returns the words spoken."""
        text = work.answer.text
        if work.speech is None:  # text only
            return text
        speaker, chunk = self.speaker, work.first_chunk
        while chunk is not None:
            work.stage = "speaker"
            if work.playback is None:
                if self._listener is not None and not self.config.headset:
                    self._listener.gated = True  # loudspeakers: do not hear ourselves
                work.playback = Playback(text, start_s=speaker.played_s)
                speaker.play(chunk.samples)
                work.first_audio = time.perf_counter()
                self._publish(SpeakingStarted(work.turn, text))
            else:
                speaker.play(chunk.samples)
            work.playback.queued(chunk.text, chunk.duration_s)
            work.stage = "speech"
            chunk = await asyncio.to_thread(next, work.speech, None)
        if work.playback is None:
            return ""
        work.stage = "speaker"
        await asyncio.to_thread(speaker.wait)
        spoken = " ".join(piece for piece, _ in work.playback.chunks)
        self._publish(SpeakingFinished(work.turn, spoken))
        return spoken

    async def _record(self, work: _Work, *, interrupted: bool, spoken: str) -> None:
        """Remember the turn, publish its metrics and append it to the log, once."""
        if work.recorded:
            return
        work.recorded = True
        metrics = self._metrics(work)
        answer = work.answer
        record = TurnRecord(
            turn=work.turn,
            user=work.transcript or "",
            started_at=work.started_at,
            thinking=answer.thinking if answer else "",
            answer=answer.text if answer else "",
            interrupted=interrupted,
            spoken=spoken,
            source=work.source,
            metrics={k: v for k, v in dataclasses.asdict(metrics).items() if k != "turn"},
        )
        self.memory.add(record)
        self._publish(metrics)
        if self.log is not None:
            failure = await asyncio.to_thread(self.log.append, record)
            if failure is not None:
                self._publish(Error(work.turn, "log", failure.message, failure.hint))

    def _metrics(self, work: _Work) -> TurnMetrics:
        answer = work.answer
        ready = (
            max(work.answered, work.endpoint) if work.answered and work.endpoint else work.answered
        )
        transcribed = work.transcribed
        if transcribed is not None and work.endpoint is not None:
            transcribed = max(transcribed, work.endpoint)  # speculative: ready before endpoint
        return TurnMetrics(
            work.turn,
            endpoint_ms=_ms(work.speech_ended, work.endpoint),
            transcript_ms=_ms(work.endpoint, transcribed),
            engine_ms=round(answer.latency_s * 1000, 1) if answer else None,
            steps=answer.steps if answer else None,
            first_audio_ms=_ms(ready, work.first_audio),
            voice_to_voice_ms=_ms(work.speech_ended, work.first_audio),
            speculative=work.speculative,
        )

    # ------------------------------------------------------------------ housekeeping

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _stop_everything(self) -> None:
        """Cancel all turn work and silence the speaker (Ctrl-C, end of input)."""
        for work in (self._active, self._speculation):
            if work is not None:
                work.cancel()
        self._active = self._speculation = self._utterance = None
        for task in list(self._background):
            task.cancel()
        if self.speaker is not None:
            self.speaker.stop()
