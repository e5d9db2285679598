"""Session logic against a fake microphone and a fake speaker (see ``sessions.py``):
barge-in, gating, dropped early starts, stage failures and every command, with the real
Whisper, engine and Piper. Nothing here depends on a sound server or on timing bounds."""

from __future__ import annotations

import asyncio
import datetime
import logging

import numpy as np
import pytest
from quicksilver.assistant.commands import (
    CancelTurn,
    Mute,
    PushToTalkDown,
    PushToTalkUp,
    SubmitAudio,
    SubmitText,
    Unmute,
    UpdateSettings,
)
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    Error,
    FinalTranscript,
    Interrupted,
    Listening,
    Muted,
    SettingsChanged,
    SpeakingFinished,
    SpeakingStarted,
    SpeechStarted,
    TurnCompleted,
    TurnMetrics,
)
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.resample import resample
from quicksilver.audio.tts import spoken_pieces

from tests.assistant.sessions import (
    LONG_ANSWER_QUESTION,
    answers,
    running,
    typed_session,
    voice_session,
)
from tests.conftest import digits_in, silence

pytestmark = pytest.mark.asyncio


async def test_barge_in_stops_the_answer_and_keeps_what_was_heard(
    espeak, reasoner, transcriber, voice
):
    session, mic, output = voice_session(reasoner, transcriber, voice, headset=True)
    async with running(session) as events:
        mic.say(espeak(LONG_ANSWER_QUESTION))
        started = await events.wait_for(SpeakingStarted)
        await asyncio.sleep(1.5)  # about a second of the answer has played
        mic.say(espeak("Hello."), after_s=0)
        interrupted = await events.wait_for(Interrupted, timeout=15)
        stops_at_barge_in = output.stops
        await events.wait_for(TurnCompleted, count=2)

    full = " ".join(spoken_pieces(started.text))
    assert interrupted.turn == 1 and interrupted.spoken and interrupted.dropped
    assert f"{interrupted.spoken} {interrupted.dropped}" == full
    assert stops_at_barge_in >= 1  # the speaker was silenced, not left to play out
    first, second = (e.record for e in events.of(TurnCompleted))
    assert first.interrupted and first.spoken == interrupted.spoken
    assert first.answer == started.text
    assert second.user.lower().startswith("hello") and not second.interrupted
    assert session.memory.exchanges[0].assistant == interrupted.spoken
    assert events.of(SpeakingFinished, 1) == []


async def test_with_loudspeakers_speech_during_the_answer_is_not_heard(
    espeak, reasoner, transcriber, voice
):
    session, mic, _ = voice_session(reasoner, transcriber, voice, headset=False)
    async with running(session) as events:
        mic.say(espeak(LONG_ANSWER_QUESTION))
        await events.wait_for(SpeakingStarted)
        mic.say(espeak("Hello."), after_s=0.3)
        await events.wait_for(SpeakingFinished)
        await asyncio.sleep(1.0)
    assert events.of(Interrupted) == []
    assert {e.turn for e in events.events} == {0, 1}


async def test_speech_resuming_after_a_pause_drops_the_early_start(
    espeak, reasoner, transcriber, voice, caplog
):
    """A 350 ms pause is past the early start (200 ms) but not the hang-over (500 ms):
    the work started there is dropped and its drafts never published."""
    caplog.set_level(logging.DEBUG, logger="quicksilver.assistant.session")
    session, mic, _ = voice_session(reasoner, transcriber, voice)
    speech = np.concatenate([espeak("What is seventeen"), silence(0.35), espeak("times three?")])
    async with running(session) as events:
        mic.say(speech)
        metrics = await events.wait_for(TurnMetrics)

    assert "speculative answer dropped" in caplog.text
    (final,) = events.of(FinalTranscript)
    assert {"17", "3"} <= digits_in(final.text), final.text
    steps = [d.step for d in events.of(Denoise)]  # only the confirmed answer's drafts
    assert steps == list(range(1, len(steps) + 1)) and 1 < len(steps) <= 16
    assert len(events.of(AnswerReady)) == 1
    assert metrics.speculative and metrics.voice_to_voice_ms > metrics.endpoint_ms > 0


@pytest.mark.parametrize("semantic", [True, False], ids=["judged", "timed"])
async def test_a_finished_question_ends_at_its_pause_not_after_the_hang_over(
    espeak, reasoner, transcriber, voice, semantic
):
    session, mic, _ = voice_session(  # no whole pause: only the ear can end it early
        reasoner, transcriber, voice, hangover_ms=2000, whole_pause_ms=2000,
        semantic_turns=semantic,
    )  # fmt: skip
    async with running(session) as events:
        # whole words, and a voice the turn model hears as finished (it is unsure of espeak)
        mic.say(resample(voice.speak("What is seventeen times three?"), voice.sample_rate, 16000))
        metrics = await events.wait_for(TurnMetrics)
    if semantic:  # the question ends at the judged pause
        assert metrics.endpoint_ms < 2000
    else:  # only 2 s of silence ends it
        assert metrics.endpoint_ms >= 2000


@pytest.mark.parametrize("whole_pause_ms", [300, 5000])
async def test_whole_words_the_ear_is_unsure_of_end_after_the_whole_pause(
    espeak, reasoner, transcriber, voice, whole_pause_ms
):
    """espeak's flat "what is seventeen times three" does not sound finished to Smart
    Turn, but its words are whole: ``whole_pause_ms`` of silence ends it, unless the
    hang-over is shorter."""
    from quicksilver.audio.turn import SmartTurn

    question = espeak("What is seventeen times three?")
    heard = np.concatenate([silence(1.0), question, silence(0.1)])
    assert SmartTurn().probability(heard) < 0.5  # the ear is unsure of this voice
    session, mic, _ = voice_session(
        reasoner, transcriber, voice, hangover_ms=2000, whole_pause_ms=whole_pause_ms
    )
    async with running(session) as events:
        mic.say(question)
        metrics = await events.wait_for(TurnMetrics)
    (final,) = events.of(FinalTranscript)
    assert {"17", "3"} <= digits_in(final.text), final.text
    if whole_pause_ms < 2000:
        assert whole_pause_ms <= metrics.endpoint_ms < 2000
    else:
        assert metrics.endpoint_ms >= 2000


async def test_a_pause_inside_a_question_that_breaks_off_does_not_end_it(
    espeak, reasoner, transcriber, voice
):
    """900 ms after "times" is more than the hang-over (500 ms) but the words break
    off, so the pause may last up to ``max_pause_ms`` (1500 ms)."""
    session, mic, _ = voice_session(reasoner, transcriber, voice)
    speech = np.concatenate([espeak("What is seventeen times"), silence(0.9), espeak("three?")])
    async with running(session) as events:
        mic.say(speech)
        await events.wait_for(TurnMetrics)
        await asyncio.sleep(0.5)
    (final,) = events.of(FinalTranscript)
    assert {"17", "3"} <= digits_in(final.text), final.text


async def test_without_an_early_start_the_turn_says_so(espeak, reasoner, transcriber, voice):
    session, mic, _ = voice_session(reasoner, transcriber, voice, speculative_ms=0)
    async with running(session) as events:
        mic.say(espeak("Thank you."))
        metrics = await events.wait_for(TurnMetrics)
    assert not metrics.speculative and metrics.transcript_ms > 0
    assert answers("thank you", events.of(AnswerReady)[0].text)


async def test_cancel_stops_the_spoken_answer_and_the_session_goes_on(
    espeak, reasoner, transcriber, voice
):
    session, _, output = voice_session(reasoner, transcriber, voice)
    async with running(session) as events:
        session.send(SubmitText(LONG_ANSWER_QUESTION))
        await events.wait_for(SpeakingStarted)
        await asyncio.sleep(0.8)
        session.send(CancelTurn())
        interrupted = await events.wait_for(Interrupted)
        session.send(SubmitText("thank you"))
        await events.wait_for(TurnCompleted, count=2)
    assert interrupted.turn == 1 and interrupted.dropped
    records = [e.record for e in events.of(TurnCompleted)]
    assert [(r.turn, r.interrupted) for r in records] == [(1, True), (2, False)]
    assert answers("thank you", records[1].answer)
    assert output.stops >= 1


async def test_muted_microphone_hears_nothing_until_unmuted(espeak, reasoner, transcriber, voice):
    session, mic, _ = voice_session(reasoner, transcriber, voice)
    async with running(session) as events:
        session.send(Mute())
        await events.wait_for(Muted)
        mic.say(espeak("Hello."))
        await asyncio.sleep(2.5)
        assert events.of(SpeechStarted) == []
        session.send(Unmute())
        mic.say(espeak("Thank you."))
        completed = await events.wait_for(TurnCompleted)
    assert [e.muted for e in events.of(Muted)] == [True, False]
    assert completed.record.user.lower().startswith("thank you")


async def test_push_to_talk_answers_at_once_when_the_key_goes_up(
    espeak, reasoner, transcriber, voice
):
    session, mic, _ = voice_session(reasoner, transcriber, voice, hangover_ms=3000)
    question = espeak("What is seventeen times three?")
    async with running(session) as events:
        session.send(PushToTalkDown())
        mic.say(question, after_s=0.2)
        await asyncio.sleep(0.2 + question.size / 16000 + 0.3)
        session.send(PushToTalkUp())
        completed = await events.wait_for(TurnCompleted, timeout=30)
    # the 3 s hang-over never had to pass: the key said the question was over
    assert events.of(SpeechStarted)[0].turn == completed.turn == 1
    assert {"17", "3"} <= digits_in(completed.record.user), completed.record.user
    assert answers("what is seventeen times three", completed.record.answer)


async def test_settings_change_between_turns_and_bad_ones_are_refused(reasoner):
    session = typed_session(reasoner, Settings(steps=16))
    async with running(session) as events:
        session.send(SubmitText("hello"))
        await events.wait_for(TurnCompleted)
        session.send(UpdateSettings({"steps": 4, "max_turns": 2}))
        changed = await events.wait_for(SettingsChanged)
        session.send(UpdateSettings({"stpes": 4}))
        session.send(UpdateSettings({"model": "elsewhere"}))
        session.send(UpdateSettings({"steps": 0}))
        session.send(SubmitText("thank you"))
        await events.wait_for(TurnCompleted, count=2)
    assert changed.changes == {"steps": 4, "max_turns": 2}
    assert {d.total_steps for d in events.of(Denoise, 1)} == {16}
    assert {d.total_steps for d in events.of(Denoise, 2)} == {4}
    errors = [e.message for e in events.of(Error)]
    assert len(errors) == 3 and all(e.stage == "command" for e in events.of(Error))
    assert "did you mean 'steps'" in errors[0]
    assert "model cannot change while the session runs" in errors[1]
    assert "at least 1" in errors[2]
    assert session.settings.steps == 4 and session.memory.exchanges.maxlen == 2


async def test_instructions_join_the_system_message_from_the_next_turn(reasoner):
    today = datetime.date(2026, 12, 2)
    session = typed_session(reasoner, Settings(max_turns=0), today=lambda: today)
    async with running(session) as events:
        session.send(SubmitText("what is 2 plus 2"))
        await events.wait_for(TurnCompleted)
        session.send(UpdateSettings({"instructions": "Answer like a pirate."}))
        await events.wait_for(SettingsChanged)
        session.send(SubmitText("what is 2 plus 2"))
        await events.wait_for(TurnCompleted, count=2)
    plain, instructed = (events.of(AnswerReady, turn)[0].prompt_tokens for turn in (1, 2))
    system = f"{reasoner.date_context(today)}\nAnswer like a pirate."
    question = {"role": "user", "content": "what is 2 plus 2"}
    # the prompt the answering model read (a routed build's experts may read it their own way)
    answering = reasoner.engine_for(reasoner.route([question]))
    assert plain == answering.count_prompt_tokens([{"role": "system",
                                                    "content": reasoner.date_context(today)},
                                                   question])  # fmt: skip
    assert instructed == answering.count_prompt_tokens(
        [{"role": "system", "content": system}, question]
    )
    assert instructed > plain


async def test_bad_commands_get_errors_and_lose_nothing(reasoner):
    session = typed_session(reasoner)
    async with running(session) as events:
        session.send(SubmitText("   "))
        session.send(SubmitAudio(silence(1.0)))  # this session has no Whisper
        session.send(PushToTalkDown())  # nor a microphone
        session.send(SubmitText("hello"))
        await events.wait_for(TurnCompleted)
    messages = [e.message for e in events.of(Error)]
    assert messages == [
        "the question is empty",
        "this session has no speech recognition",
        "this session has no microphone",
    ]
    assert [e.record.user for e in events.of(TurnCompleted)] == ["hello"]


async def test_a_recording_with_no_speech_says_so(reasoner, transcriber):
    session = typed_session(reasoner, transcriber=transcriber)
    async with running(session) as events:
        session.send(SubmitAudio(silence(2.0)))
        error = await events.wait_for(Error)
    assert (error.stage, error.message) == ("command", "no speech found in the audio")


async def test_an_unplugged_microphone_is_reported_and_ends_the_session(
    reasoner, transcriber, voice
):
    session, mic, _ = voice_session(reasoner, transcriber, voice)
    events = []
    session.subscribe(events.append)
    task = asyncio.create_task(session.run())
    await asyncio.sleep(0.3)
    mic.unplug()
    with pytest.raises(AudioDeviceError):
        await asyncio.wait_for(task, timeout=10)
    (error,) = [e for e in events if isinstance(e, Error)]
    assert error.stage == "microphone" and "unplugged" in error.message and error.hint
    assert isinstance(events[0], Listening)


async def test_a_question_typed_during_a_spoken_answer_waits_for_it(
    espeak, reasoner, transcriber, voice
):
    session, mic, _ = voice_session(reasoner, transcriber, voice)
    async with running(session) as events:
        mic.say(espeak("Thank you."))
        await events.wait_for(SpeakingStarted)
        session.send(SubmitText("hello"))
        await events.wait_for(TurnCompleted, count=2)
    kinds = [(e.type, e.turn) for e in events.events if e.type != "AudioLevel"]
    assert kinds.index(("SpeakingFinished", 1)) < kinds.index(("FinalTranscript", 2))
    assert [e.record.source for e in events.of(TurnCompleted)] == ["voice", "text"]
