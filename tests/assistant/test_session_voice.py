"""The whole voice loop on real devices: a PulseAudio FIFO microphone that the test speaks
into at real-time pace, and a null-sink speaker whose monitor the test records."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    FinalTranscript,
    Interrupted,
    Listening,
    SpeakingFinished,
    SpeakingStarted,
    TurnMetrics,
)
from quicksilver.assistant.listener import ListenConfig
from quicksilver.assistant.playback import spoken_pieces
from quicksilver.assistant.session import Session, SessionConfig
from quicksilver.assistant.transcript import TranscriptLog
from quicksilver.audio.devices import Microphone, Speaker

from tests.assistant.sessions import LONG_ANSWER_QUESTION, Recorder, answers
from tests.conftest import RATE, MicFeed, digits_in, silence

pytestmark = pytest.mark.asyncio
LOUD = 0.02  # a sample above this is sound, not silence


@dataclass
class Conversation:
    session: Session
    events: Recorder
    microphone: Microphone
    feed: MicFeed

    def say(self, speech: np.ndarray, after_s: float = 0.5) -> None:
        self.feed.say(np.concatenate([silence(after_s), speech]))


@contextlib.asynccontextmanager
async def conversation(
    pulse, reasoner, transcriber, voice, log: TranscriptLog, **config
) -> AsyncIterator[Conversation]:
    """A voice session on the virtual devices, cancelled (as by Ctrl-C) on exit."""
    speaker = Speaker("pulse", sample_rate=voice.sample_rate)
    session = Session(
        reasoner,
        transcriber=transcriber,
        voice=voice,
        speaker=speaker,
        log=log,
        config=SessionConfig(steps=16, **config),
    )
    recorder = Recorder()
    session.add_callback(recorder)
    with pulse.feeding_mic() as feed:
        microphone = Microphone("pulse")
        task = asyncio.create_task(session.run_voice(microphone))
        try:
            yield Conversation(session, recorder, microphone, feed)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            speaker.close()


async def test_a_spoken_question_is_answered_aloud(
    pulse, espeak, reasoner, transcriber, voice, tmp_path
):
    log = TranscriptLog(tmp_path / "history.jsonl")
    recording = pulse.recording_speaker()
    await asyncio.sleep(0.3)
    async with conversation(pulse, reasoner, transcriber, voice, log) as talk:
        talk.say(espeak("Thank you."))
        await talk.events.wait_for(SpeakingFinished, timeout=60)
        await talk.events.wait_for(Listening, count=2)
    recorder = talk.events
    await asyncio.sleep(0.3)
    heard = transcriber.transcribe(recording.stop())

    assert answers("thank you", heard), heard
    assert recorder.types(1, skip=("AudioLevel", "PartialTranscript", "Denoise")) == [
        "SpeechStarted",
        "FinalTranscript",
        "AnswerReady",
        "SpeakingStarted",
        "SpeakingFinished",
        "TurnMetrics",
        "Listening",
    ]
    assert recorder.of(FinalTranscript)[0].text.lower().startswith("thank you")
    steps = [d.step for d in recorder.of(Denoise, 1)]
    assert steps == list(range(1, len(steps) + 1)) and 1 < len(steps) <= 16
    metrics = recorder.of(TurnMetrics)[0]
    assert metrics.speculative, "the answer was started at the first pause"
    assert 400 <= metrics.endpoint_ms <= 900, metrics
    assert metrics.voice_to_voice_ms > metrics.endpoint_ms
    (record,), _ = log.read_recent(10)
    assert record.user.lower().startswith("thank you")
    assert (record.source, record.interrupted) == ("voice", False)
    assert record.metrics["voice_to_voice_ms"] == metrics.voice_to_voice_ms
    # cancelled like Ctrl-C: microphone closed, the ear's thread gone
    assert talk.microphone._stream.closed
    assert not any(t.name == "quicksilver-ear" for t in threading.enumerate())


async def test_speech_resuming_after_a_pause_drops_the_early_start(
    pulse, espeak, reasoner, transcriber, voice, tmp_path, caplog
):
    """A 350 ms pause is past the speculative threshold (200 ms) but not the hang-over
    (500 ms): the work started there is dropped and its drafts never published."""
    caplog.set_level(logging.DEBUG, logger="quicksilver.assistant.session")
    speech = np.concatenate([espeak("What is seventeen"), silence(0.35), espeak("times three?")])
    log = TranscriptLog(tmp_path / "history.jsonl")
    async with conversation(pulse, reasoner, transcriber, voice, log) as talk:
        talk.say(speech)
        await talk.events.wait_for(TurnMetrics, timeout=60)
    recorder = talk.events

    assert "speculative answer dropped" in caplog.text
    (final,) = recorder.of(FinalTranscript)
    assert {"17", "3"} <= digits_in(final.text), final.text
    steps = [d.step for d in recorder.of(Denoise)]  # only the confirmed answer's drafts
    assert steps == list(range(1, len(steps) + 1)) and 1 < len(steps) <= 16
    assert len(recorder.of(AnswerReady)) == 1


async def test_without_early_start_the_turn_says_so(
    pulse, espeak, reasoner, transcriber, voice, tmp_path
):
    log = TranscriptLog(tmp_path / "history.jsonl")
    off = ListenConfig(speculative_ms=None)
    async with conversation(pulse, reasoner, transcriber, voice, log, listen=off) as talk:
        talk.say(espeak("Thank you."))
        metrics = await talk.events.wait_for(TurnMetrics, timeout=60)
    recorder = talk.events
    assert not metrics.speculative
    assert metrics.transcript_ms > 0 and metrics.voice_to_voice_ms > metrics.endpoint_ms
    assert answers("thank you", recorder.of(AnswerReady)[0].text)


async def test_barge_in_stops_playback_and_logs_the_turn_as_interrupted(
    pulse, espeak, reasoner, transcriber, voice, tmp_path
):
    log = TranscriptLog(tmp_path / "history.jsonl")
    recording = pulse.recording_speaker()
    await asyncio.sleep(0.3)
    async with conversation(pulse, reasoner, transcriber, voice, log, headset=True) as talk:
        talk.say(espeak(LONG_ANSWER_QUESTION))
        started = await talk.events.wait_for(SpeakingStarted, timeout=60)
        # barge in halfway through the answer; the VAD needs ~0.3 s to be sure of speech
        answer_s = voice.speak(started.text).size / voice.sample_rate
        since = time.monotonic() - talk.events.time_of(started)
        talk.say(espeak("Hello."), after_s=max(answer_s / 2 - 0.3 - since, 0.0))
        interrupted = await talk.events.wait_for(Interrupted, timeout=15)
        await talk.events.wait_for(TurnMetrics, count=2, timeout=60)  # the new question done
    heard = recording.stop()
    recorder, session = talk.events, talk.session

    # On the sink monitor: answer audio before the stop, silence from 200 ms after it until
    # the next answer. Event times map onto the recording from the first answer's onset.
    chunk = next(voice.synthesize(started.text))
    lead_s = np.argmax(np.abs(chunk.samples) > LOUD) / voice.sample_rate
    onset = np.argmax(np.abs(heard) > LOUD) - lead_s * RATE

    def at(event) -> int:
        return int(onset + (recorder.time_of(event) - recorder.time_of(started)) * RATE)

    # The window ends 600 ms after the stop: the barge-in question has barely ended then,
    # so no new answer can sound yet (event times map onto the recording only roughly).
    answered_again = (recorder.of(SpeakingStarted, 2) or recorder.of(TurnMetrics, 2))[0]
    assert np.abs(heard[int(onset) : at(interrupted)]).max() > 5 * LOUD
    stop = at(interrupted)
    after_stop = heard[stop + int(0.2 * RATE) : min(at(answered_again), stop + int(0.6 * RATE))]
    assert after_stop.size > 0.3 * RATE
    assert np.abs(after_stop).max() < LOUD, np.argmax(np.abs(after_stop) > LOUD) / RATE

    full = " ".join(spoken_pieces(started.text))
    assert interrupted.spoken and interrupted.dropped
    assert f"{interrupted.spoken} {interrupted.dropped}" == full
    first_record, second_record = log.read_recent(10)[0]
    assert first_record.interrupted and first_record.spoken == interrupted.spoken
    assert first_record.answer == started.text
    assert second_record.user.lower().startswith("hello") and not second_record.interrupted
    assert session.memory.exchanges[0].assistant == interrupted.spoken


async def test_with_loudspeakers_speech_during_playback_is_not_heard(
    pulse, espeak, reasoner, transcriber, voice, tmp_path
):
    """Without a headset the microphone is gated while the assistant speaks, so its own
    voice (here: the user talking over it) never starts a turn."""
    log = TranscriptLog(tmp_path / "history.jsonl")
    async with conversation(pulse, reasoner, transcriber, voice, log) as talk:
        talk.say(espeak(LONG_ANSWER_QUESTION))
        await talk.events.wait_for(SpeakingStarted, timeout=60)
        talk.say(espeak("Hello."), after_s=0.5)
        await talk.events.wait_for(SpeakingFinished, timeout=60)
        await asyncio.sleep(1.0)
    assert talk.events.of(Interrupted) == []
    assert {e.turn for e in talk.events.events} == {0, 1}
