"""The whole voice loop on real devices: a PulseAudio FIFO microphone that the test speaks
into at real-time pace, and a null-sink speaker whose monitor the test records. The
session's logic (barge-in, gating, early starts, commands) is tested without a sound
server in ``test_session_logic.py``."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
import pytest
from quicksilver.assistant.commands import SubmitAudio, SubmitText
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    Denoise,
    FinalTranscript,
    Listening,
    SpeakingFinished,
    TurnCompleted,
    TurnMetrics,
)
from quicksilver.assistant.factory import build_session
from quicksilver.assistant.session import Session
from quicksilver.assistant.transcript import TranscriptLog

from benchmarks.pulse import MicFeed
from tests.assistant.sessions import Recorder, answers, logged, running
from tests.conftest import silence

pytestmark = pytest.mark.asyncio
# A turn's events from its transcript on, runs of drafts folded into one Denoise.
SPOKEN_ANSWER = [
    "FinalTranscript",
    "Denoise",
    "AnswerReady",
    "SpeakingStarted",
    "SpeakingFinished",
    "TurnMetrics",
    "TurnCompleted",
    "Listening",
]


@dataclass
class Conversation:
    session: Session
    events: Recorder
    microphone: object
    feed: MicFeed

    def say(self, speech: np.ndarray, after_s: float = 0.5) -> None:
        self.feed.say(np.concatenate([silence(after_s), speech]))


@contextlib.asynccontextmanager
async def conversation(
    pulse, reasoner, transcriber, voice, log: TranscriptLog
) -> AsyncIterator[Conversation]:
    """A voice session on the virtual devices, built as the command line builds it, and
    cancelled (as by Ctrl-C) on exit."""
    settings = Settings(steps=16, input_device="pulse", output_device="pulse", log_path=log.path)
    with pulse.feeding_mic() as feed:
        session = build_session(settings, engine=reasoner, transcriber=transcriber, voice=voice)
        async with running(session) as recorder:
            yield Conversation(session, recorder, session.microphone, feed)


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
        *(kind for kind in SPOKEN_ANSWER if kind != "Denoise"),
    ]
    assert recorder.of(FinalTranscript)[0].text.lower().startswith("thank you")
    steps = [d.step for d in recorder.of(Denoise, 1)]
    assert steps == list(range(1, len(steps) + 1)) and 1 < len(steps) <= 16
    metrics = recorder.of(TurnMetrics)[0]
    assert metrics.speculative, "the answer was started at the first pause"
    assert metrics.endpoint_ms > 0, metrics  # at the judged pause (test_session_logic)
    # never before the endpoint; with the voice ready ahead of it, within a rounding of it
    assert metrics.voice_to_voice_ms >= metrics.endpoint_ms
    (record,) = await logged(log, 1)
    assert record.user.lower().startswith("thank you")
    assert (record.source, record.interrupted) == ("voice", False)
    assert record.metrics["voice_to_voice_ms"] == metrics.voice_to_voice_ms
    # cancelled like Ctrl-C: microphone closed, the ear's thread gone
    assert talk.microphone._stream.closed
    assert not any(t.name == "quicksilver-ear" for t in threading.enumerate())


async def test_typed_recorded_and_spoken_turns_go_through_the_same_stages(
    pulse, espeak, reasoner, transcriber, voice, tmp_path
):
    """One session on the virtual devices answers a typed question, a recording and the
    microphone: from the final transcript on, the three turns emit the same events."""
    log = TranscriptLog(tmp_path / "history.jsonl")
    thanks = espeak("Thank you.")
    async with conversation(pulse, reasoner, transcriber, voice, log) as talk:
        talk.session.send(SubmitText("thank you"))
        await talk.events.wait_for(TurnCompleted, count=1)
        talk.session.send(SubmitAudio(np.concatenate([silence(0.3), thanks, silence(0.5)])))
        await talk.events.wait_for(TurnCompleted, count=2)
        talk.say(thanks)
        await talk.events.wait_for(TurnCompleted, count=3)
        await talk.events.wait_for(Listening, count=4)

    def from_transcript(turn: int) -> list[str]:
        kinds = talk.events.types(turn, skip=("AudioLevel", "PartialTranscript"))
        kinds = kinds[kinds.index("FinalTranscript") :]
        return [kind for kind, _ in itertools.groupby(kinds)]  # runs of Denoise folded

    assert from_transcript(1) == from_transcript(2) == from_transcript(3) == SPOKEN_ANSWER
    assert [e.source for e in talk.events.of(FinalTranscript)] == ["text", "file", "voice"]
    for turn in (1, 2, 3):
        assert answers("thank you", talk.events.of(SpeakingFinished, turn)[0].text)
        assert {d.total_steps for d in talk.events.of(Denoise, turn)} == {16}
    records = await logged(log, 3)
    assert [r.source for r in records] == ["text", "file", "voice"]
