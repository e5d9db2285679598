"""The session: one conversation, driven by commands, reported as events.

A face builds it with :func:`quicksilver.assistant.factory.build_session`, runs
:meth:`Session.run`, sends :mod:`~quicksilver.assistant.commands` and renders the
:mod:`~quicksilver.assistant.events` it subscribed to. One asyncio loop owns the
conversation's state; the ear (:mod:`~quicksilver.assistant.listener`) reads the
microphone in its own thread, and the stages (:mod:`~quicksilver.assistant.stages`)
run their blocking work in worker threads.

Every turn, spoken, typed or from a file, is a :class:`~quicksilver.assistant.turn.Turn`
that goes through the same stages: transcribe (unless typed) → think → speak (when
there is an output). A spoken turn may start at a pause, before the endpoint; if the
user goes on, that attempt is cancelled and whatever it still delivers is dropped
because it is no longer the session's current turn, not by draining queues. The engine
checks the cancellation between denoising steps, so dropped work stops within a step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any

from quicksilver.assistant.commands import (
    CancelTurn,
    Command,
    Mute,
    PushToTalkDown,
    PushToTalkUp,
    ResetConversation,
    SubmitAudio,
    SubmitText,
    Unmute,
    UpdateSettings,
)
from quicksilver.assistant.config import LIVE_SETTINGS, Settings, changed_settings
from quicksilver.assistant.events import (
    AnswerReady,
    AudioLevel,
    ConversationReset,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    Listening,
    Muted,
    PartialTranscript,
    SettingsChanged,
    SpeakingFinished,
    SpeakingStarted,
    SpeechStarted,
    TurnCompleted,
)
from quicksilver.assistant.listener import (
    Began,
    Ended,
    Failed,
    FrameSource,
    Growing,
    Held,
    Level,
    ListenConfig,
    Listener,
    Paused,
    Resumed,
    Signal,
)
from quicksilver.assistant.memory import Memory
from quicksilver.assistant.stages import (
    Speak,
    StageFailed,
    Think,
    Transcribe,
    settled_first_piece,
    spoken_answer,
)
from quicksilver.assistant.turn import Turn
from quicksilver.audio.resample import resample
from quicksilver.audio.turn import SmartTurn, unfinished
from quicksilver.audio.vad import SAMPLE_RATE, SpeechEnd, VadConfig, VoiceActivity
from quicksilver.engine import DenoiseFrame

log = logging.getLogger(__name__)
FINISHED = 0.5  # the turn model's probability above which a pause ends the question

Subscriber = Callable[[Event], None]
MICROPHONE_HINT = "reconnect the microphone and start again, or type your questions"


def find_utterances(samples, vad: VadConfig) -> list[SpeechEnd]:
    """The utterances of a whole recording, each at most ``vad.max_utterance_s`` long."""
    activity = VoiceActivity(vad)
    return [e for e in activity.process(samples) + activity.flush() if isinstance(e, SpeechEnd)]


class Session:
    """A conversation with one user; see the module docstring. Build it with
    :func:`~quicksilver.assistant.factory.build_session`.

    ``think`` answers (and holds the memory); ``transcribe`` makes spoken turns possible
    (a ``microphone``, :class:`SubmitAudio`); ``speak`` makes answers heard. Completed
    turns go to the memory and out as :class:`TurnCompleted` events, which the
    transcript log subscribes to.
    """

    def __init__(
        self,
        think: Think,
        *,
        transcribe: Transcribe | None = None,
        speak: Speak | None = None,
        microphone: FrameSource | None = None,
        settings: Settings | None = None,
        turn_model: SmartTurn | None = None,
    ) -> None:
        if microphone is not None and transcribe is None:
            raise ValueError("a microphone needs a transcriber: Session(..., transcribe=...)")
        self.think = think
        self.transcribe = transcribe
        self.speak = speak
        self.microphone = microphone
        self.turn_model = turn_model  # hears whether a pause ends the question
        self.settings = settings or Settings()
        self.think.steps = self.settings.steps
        self.think.instructions = self.settings.instructions
        self.think.unsure_below = self.settings.unsure_below
        self.muted = False
        self.turn = 0  # id of the latest turn
        self._subscribers: list[Subscriber] = []
        self._inbox: asyncio.Queue[Command | Signal | None] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: Listener | None = None
        self._utterance: int | None = None  # turn of the utterance being spoken
        self._speculation: Turn | None = None  # started at a pause, not yet confirmed
        self._active: Turn | None = None  # confirmed, being answered or spoken
        self._queue: deque[Turn] = deque()  # typed and file turns, answered in order
        self._runner: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()

    @property
    def memory(self) -> Memory:
        return self.think.memory

    # ------------------------------------------------------------------ faces

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Call ``subscriber(event)`` on the session's loop for every event from now on
        (it must not block); returns the function that unsubscribes it."""
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    def send(self, command: Command) -> None:
        """Hand the session a command; safe from any thread, before or during :meth:`run`."""
        self._deliver(command)

    def stop(self) -> None:
        """End :meth:`run` (from any thread); turns in progress are cancelled."""
        self._deliver(None)

    async def idle(self) -> None:
        """Wait until no turn is being answered, spoken or waiting its turn."""
        while (
            self._inbox.qsize()  # commands not yet taken up
            or self._active
            or self._queue
            or self._speculation
            or self._busy_runner()
        ):
            await asyncio.sleep(0.02)

    def close(self) -> None:
        """Release the output (close the speaker, or write the answers' WAV file); call it
        once the session is over."""
        if self.speak is not None:
            self.speak.output.close()

    def report(self, event: Event) -> None:
        """Publish an event on behalf of a subscriber (the transcript log's failures)."""
        self._publish(event)

    async def run(self) -> None:
        """Converse until :meth:`stop` or cancellation; closes the microphone.

        Raises :class:`quicksilver.audio.AudioDeviceError` (after an ``Error`` event)
        when the microphone stops delivering audio.
        """
        self._loop = asyncio.get_running_loop()
        if self.microphone is not None:
            vad = VoiceActivity(self._vad_config())
            self._listener = Listener(
                self.microphone, vad, self._inbox, self._loop, self._listen_config()
            )
            self._listener.start()
        self._publish(Listening(self.turn))
        try:
            while (item := await self._inbox.get()) is not None:
                if isinstance(item, Failed):
                    self._publish(Error(self.turn, "microphone", str(item.error), MICROPHONE_HINT))
                    raise item.error
                if isinstance(item, Command):
                    self._on_command(item)
                else:
                    await self._on_signal(item)
        finally:
            self._close()

    # ------------------------------------------------------------------ commands

    def _on_command(self, command: Command) -> None:
        if isinstance(command, SubmitText):
            self._submit_text(command.text)
        elif isinstance(command, SubmitAudio):
            self._submit_audio(command)
        elif isinstance(command, CancelTurn):
            self._drop_speculation()
            self._interrupt()
        elif isinstance(command, Mute | Unmute):
            self.muted = isinstance(command, Mute)
            if self._listener is not None:
                self._listener.muted = self.muted
            self._publish(Muted(self.turn, self.muted))
        elif isinstance(command, PushToTalkDown):
            if self._listener is None:
                self._command_error("this session has no microphone", MICROPHONE_HINT)
                return
            self._drop_speculation()
            self._interrupt()
            self._new_utterance()
            self._listener.hold()
        elif isinstance(command, PushToTalkUp):
            if self._listener is not None:
                self._listener.release()
        elif isinstance(command, UpdateSettings):
            self._update_settings(command.changes)
        elif isinstance(command, ResetConversation):
            self._drop_speculation()
            self._interrupt()
            self._queue.clear()
            self.memory.clear()
            self._publish(ConversationReset(self.turn))

    def _submit_text(self, text: str) -> None:
        if not text.strip():
            self._command_error("the question is empty", "type or say something to answer")
            return
        self.turn += 1
        self._enqueue(Turn(self.turn, "text", transcript=text.strip()))

    def _submit_audio(self, command: SubmitAudio) -> None:
        if self.transcribe is None:
            self._command_error(
                "this session has no speech recognition", "send the question as text"
            )
            return
        samples = command.samples
        if command.sample_rate != SAMPLE_RATE:
            samples = resample(samples, command.sample_rate, SAMPLE_RATE)
        utterances = find_utterances(samples, VadConfig(hangover_ms=self.settings.hangover_ms))
        if not utterances:
            self._command_error("no speech found in the audio", "record it again, louder")
        for utterance in utterances:
            self.turn += 1
            self._enqueue(Turn(self.turn, "file", audio=utterance.audio))

    def _update_settings(self, changes: dict[str, Any]) -> None:
        try:
            settings = changed_settings(self.settings, changes)
        except ValueError as error:
            self._command_error(str(error), "see `quicksilver config` for every setting")
            return
        fixed = sorted(name for name in changes if name not in LIVE_SETTINGS)
        if fixed:
            self._command_error(
                f"{', '.join(fixed)} cannot change while the session runs",
                "start a new session with the new setting",
            )
            return
        self.settings = settings
        self.think.steps = settings.steps
        self.think.instructions = settings.instructions
        self.think.unsure_below = settings.unsure_below
        self.memory.resize(settings.context_tokens, settings.max_turns)
        if self._listener is not None:
            self._listener.config = self._listen_config()
            self._listener.vad.config = self._vad_config()
        applied = {name: getattr(settings, name) for name in changes}
        self._publish(SettingsChanged(self.turn, applied))

    def _command_error(self, message: str, hint: str) -> None:
        self._publish(Error(self.turn, "command", message, hint))

    @property
    def longest_pause_ms(self) -> int:
        """The most silence the ear may wait before it ends an utterance: what a face
        that ends one by feeding silence (the websocket's ``commit``) must feed."""
        return self._vad_config().hangover_ms

    def _vad_config(self) -> VadConfig:
        """With judged pauses the detector waits up to ``max_pause_ms`` for a verdict,
        which ends the question sooner (see :meth:`_judge_pause`)."""
        settings = self.settings
        if self._semantic():
            return VadConfig(hangover_ms=max(settings.hangover_ms, settings.max_pause_ms))
        return VadConfig(hangover_ms=settings.hangover_ms)

    def _listen_config(self) -> ListenConfig:
        return ListenConfig(speculative_ms=self.settings.speculative_ms or None)

    # ------------------------------------------------------------------ typed and file turns

    def _enqueue(self, turn: Turn) -> None:
        self._queue.append(turn)
        if not self._busy_runner():
            self._runner = self._spawn(self._answer_queue())

    def _busy_runner(self) -> bool:
        return self._runner is not None and not self._runner.done()

    async def _answer_queue(self) -> None:
        while self._queue:
            if self._active is not None:  # a spoken turn still being answered goes first
                await asyncio.sleep(0.02)
                continue
            turn = self._queue.popleft()
            if turn.source == "file":
                self._publish(SpeechStarted(turn.id))
                turn.clock.endpoint = time.perf_counter()
            self._start(turn)
            self._confirm(turn)
            await self._complete(turn)

    # ------------------------------------------------------------------ spoken turns

    async def _on_signal(self, signal: Signal) -> None:
        if isinstance(signal, Level):
            self._publish(AudioLevel(self.turn, signal.rms, signal.speech_probability))
        elif isinstance(signal, Began):
            self._drop_speculation()
            self._interrupt()
            self._new_utterance()
        elif isinstance(signal, Growing):
            busy = self.transcribe.running
            if self._utterance is not None and not busy:
                self._spawn(self._partial(self._utterance, signal.audio))
        elif isinstance(signal, Paused):
            if self._utterance is not None:
                turn = Turn(self._utterance, "voice", audio=signal.audio, speculative=True,
                            pause=signal.pause)  # fmt: skip
                turn.clock.speech_ended = signal.silence_began
                self._speculation = turn
                self._start(turn)  # tasks[0]: the answer
        elif isinstance(signal, Resumed):
            self._drop_speculation()
        elif isinstance(signal, Ended) and self._utterance is not None:
            # the attempt started at the pause, if the user did not go on, else a new one
            turn = self._speculation or Turn(self._utterance, "voice", audio=signal.end.audio)
            self._speculation = None
            turn.clock.speech_ended, turn.clock.endpoint = signal.speech_ended, signal.detected
            self._answer_utterance(turn)
        elif isinstance(signal, Held) and self._utterance is not None:
            self._drop_speculation()
            turn = Turn(self._utterance, "voice", audio=signal.audio)
            turn.clock.speech_ended = turn.clock.endpoint = signal.released
            self._answer_utterance(turn)

    def _answer_utterance(self, turn: Turn) -> None:
        """The utterance is over: ``turn`` answers it (started already, or from now)."""
        if not turn.tasks:
            self._start(turn)
        self._utterance = None
        self._confirm(turn)
        turn.tasks.append(self._spawn(self._complete(turn)))

    def _new_utterance(self) -> None:
        self.turn += 1
        self._utterance = self.turn
        self._publish(SpeechStarted(self.turn))

    async def _partial(self, turn: int, audio) -> None:
        """A preview, only when Whisper is idle: a final transcript must never queue behind
        more than the one call already running."""
        try:
            text = await self.transcribe(audio)
        except StageFailed:  # the final transcript reports failures
            return
        if text and self._utterance == turn and self._speculation is None:
            self._publish(PartialTranscript(turn, text))

    # ------------------------------------------------------------------ end of a turn

    def _semantic(self) -> bool:
        """Whether pauses are judged (at the early start) rather than timed alone."""
        return bool(self.settings.semantic_turns and self.settings.speculative_ms)

    async def _judge_pause(self, turn: Turn) -> None:
        """Is the question over at this pause, now that its words are known? The
        listener waits up to ``max_pause_ms`` for a verdict. Words that break off
        ("… times") keep that wait; whole words end the question after
        ``whole_pause_ms`` (or the hang-over, if shorter), or as soon as the answer is
        ready to be spoken if the turn model then hears them as finished; no words, the
        hang-over (see ``audio/turn.py``).

        The ear listens only once the answer's first audio is ready, the moment its
        verdict can make the answer come sooner: run beside Whisper on a 2-core CPU, it
        slowed the transcript by a quarter (BENCHMARKS.md)."""
        if self._speculation is not turn or self._listener is None:
            return
        if turn.transcript and unfinished(turn.transcript):
            log.debug("turn %d: %r breaks off; the pause may go on", turn.id, turn.transcript)
            return
        settings = self.settings
        limit = settings.hangover_ms
        if turn.transcript:  # whole words: a flat voice need not wait the hang-over
            limit = min(limit, settings.whole_pause_ms)
        self._listener.limit_pause(turn.pause, limit)
        if not turn.transcript or self.turn_model is None:
            return
        await asyncio.wait([turn.tasks[0]])  # the answer and its first audio
        if self._speculation is not turn:  # the pause ended, or the user went on
            return
        try:
            probability = await asyncio.to_thread(self.turn_model.probability, turn.audio)
        except Exception:
            log.exception("the turn model failed; the pause's limit decides")
            return
        if self._speculation is turn and probability >= FINISHED:
            log.debug("turn %d: %r is finished (p=%.2f); ending it at the pause",
                      turn.id, turn.transcript, probability)  # fmt: skip
            self._speculation = None
            turn.clock.endpoint = time.perf_counter()
            self._listener.end_pause(turn.pause)  # the ear closes the utterance too
            self._answer_utterance(turn)

    def _drop_speculation(self) -> None:
        if self._speculation is not None:
            log.debug("turn %d: speculative answer dropped", self._speculation.id)
            self._speculation.cancel()
            self._speculation = None

    def _interrupt(self) -> None:
        """Stop the current turn (barge-in, cancel): keep what was heard, drop the rest."""
        turn = self._active
        if turn is None:
            return
        self._active = None
        spoken, dropped = "", turn.answer.text if turn.answer else ""
        if turn.speech is not None and self.speak is not None:
            spoken, dropped = self.speak.stop(turn.speech)
        turn.cancel()
        self._publish(Interrupted(turn.id, spoken, dropped))
        if turn.transcript:
            self._keep(turn, interrupted=True, spoken=spoken)

    # ------------------------------------------------------------------ one turn

    def _start(self, turn: Turn) -> None:
        """Begin transcribing and thinking (perhaps before the endpoint confirms)."""
        task = self._spawn(self._prepare(turn))
        task.add_done_callback(_retrieve)
        turn.tasks.append(task)

    def _confirm(self, turn: Turn) -> None:
        """This attempt answers the turn: publish what it held back and make it current."""
        turn.confirmed = True
        self._active = turn
        if turn.transcript is not None:
            self._publish(FinalTranscript(turn.id, turn.transcript, turn.source))
        for event in turn.pending:
            self._publish(event)
        turn.pending.clear()

    def _emit(self, turn: Turn, event: Event) -> None:
        """Publish ``turn``'s event now if it answers the turn, else once confirmed."""
        if turn.cancelled.is_set():
            return
        if turn.confirmed:
            self._publish(event)
        else:
            turn.pending.append(event)

    async def _prepare(self, turn: Turn) -> bool:
        """Transcript, answer and its first sentence of audio: all that can be done before
        the endpoint confirms the question. False when there is nothing to answer."""
        if turn.transcript is None:
            turn.transcript = await self.transcribe(turn.audio)
            turn.clock.transcribed = time.perf_counter()
            if turn.confirmed:
                self._publish(FinalTranscript(turn.id, turn.transcript, turn.source))
            elif turn.speculative and self._semantic():
                turn.tasks.append(self._spawn(self._judge_pause(turn)))
        if not turn.transcript:
            return False

        rehearse = self.speak is not None and self.settings.voice_ahead

        def draft(frame: DenoiseFrame, step_ms: float) -> None:
            nonlocal rehearse
            event = Denoise(
                turn.id, frame.step, frame.total_steps, frame.thinking, frame.text, frame.masked,
                round(step_ms, 2),
            )  # fmt: skip
            self._loop.call_soon_threadsafe(self._emit, turn, event)
            if rehearse and frame.answer is None and (piece := settled_first_piece(frame.text)):
                rehearse = False
                self._loop.call_soon_threadsafe(self._rehearse, turn, piece)

        written = await asyncio.to_thread(self.think, turn.transcript, turn.cancelled, draft)
        turn.clock.answered = time.perf_counter()
        if written is None:
            return False
        turn.answer = answer = spoken_answer(written, self.think.unsure_threshold())
        if answer.text != written.text:
            turn.withheld = written.text
        engine_ms = round(answer.latency_s * 1000, 1)
        self._emit(
            turn,
            AnswerReady(
                turn.id, answer.text, answer.thinking, answer.steps, answer.forward_passes,
                engine_ms, answer.prompt_tokens, round(answer.confidence, 4), turn.withheld,
            ),
        )  # fmt: skip
        if self.speak is not None:
            turn.speech = await self.speak.prepare(answer.text, turn.rehearsal)
        return True

    def _rehearse(self, turn: Turn, piece: str) -> None:
        """Synthesise the answer's settled first piece while the engine goes on."""
        if self.speak is not None and not turn.cancelled.is_set():
            turn.rehearsal = self.speak.rehearse(piece)
            turn.rehearsal.chunk.add_done_callback(_retrieve)

    async def _complete(self, turn: Turn) -> None:
        """Wait for the answer, speak it, keep the turn; failures become ``Error`` events."""
        try:
            if await turn.tasks[0]:
                spoken = await self._play(turn)
                if self._active is turn:
                    self._active = None  # a new utterance is a new turn now, not a barge-in
                self._keep(turn, interrupted=False, spoken=spoken)
        except asyncio.CancelledError:
            if turn.cancelled.is_set():  # interrupted: the new utterance has the floor
                return
            raise
        except StageFailed as failure:
            self._publish(Error(turn.id, failure.stage, str(failure), failure.hint))
        finally:
            if self._listener is not None:
                self._listener.gated = False
        if self._active is turn:
            self._active = None
        if self._utterance is None:
            self._publish(Listening(turn.id))

    async def _play(self, turn: Turn) -> str:
        if turn.speech is None:  # no output: the answer is text only
            return turn.answer.text

        def started() -> None:
            if self._listener is not None and not self.settings.headset:
                self._listener.gated = True  # loudspeakers: do not hear ourselves
            turn.clock.first_audio = time.perf_counter()
            self._publish(SpeakingStarted(turn.id, turn.speech.text))

        spoken = await self.speak.play(turn.speech, started)
        if turn.speech.playback is not None:
            self._publish(SpeakingFinished(turn.id, spoken))
        return spoken

    def _keep(self, turn: Turn, *, interrupted: bool, spoken: str) -> None:
        """Remember the turn and publish its metrics and record, once."""
        if turn.recorded:
            return
        turn.recorded = True
        metrics = turn.metrics()
        record = turn.record(metrics, interrupted=interrupted, spoken=spoken)
        self.memory.add(record)
        self._publish(metrics)
        self._publish(TurnCompleted(turn.id, record))

    # ------------------------------------------------------------------ housekeeping

    def _publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(event)
            except Exception:  # a broken face must not stop the conversation
                log.exception("subscriber %r failed on %s", subscriber, event.type)

    def _deliver(self, item: Command | None) -> None:
        loop = self._loop
        if loop is None or _running_loop() is loop:
            self._inbox.put_nowait(item)
        else:
            loop.call_soon_threadsafe(self._inbox.put_nowait, item)

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    def _close(self) -> None:
        """Cancel all turn work, silence the output and close the microphone."""
        for turn in (self._active, self._speculation, *self._queue):
            if turn is not None:
                turn.cancel()
        self._active = self._speculation = self._utterance = None
        self._queue.clear()
        for task in list(self._background):
            task.cancel()
        if self.speak is not None:
            self.speak.output.stop()
        if self._listener is not None:
            self._listener.stop(timeout=0)
            try:
                self.microphone.close()
            finally:
                self._listener.stop()
                self._listener = None


def _retrieve(task: asyncio.Task) -> None:
    """Done-callback for dropped work: its outcome is of no interest to anyone."""
    if not task.cancelled():
        task.exception()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
