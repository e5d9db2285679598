"""The Textual app driven by Textual's pilot against a real session: the shipped
reasoner, and for spoken input the named fakes of ``tests/assistant/sessions.py``."""

from __future__ import annotations

import asyncio
import functools
import time

import pytest
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    FinalTranscript,
    Interrupted,
    PartialTranscript,
    SpeakingStarted,
    SpeechStarted,
    TurnCompleted,
)
from quicksilver.assistant.factory import Wiring, build_session
from quicksilver.assistant.stages import UNSURE
from quicksilver.ui.app import QuicksilverApp
from quicksilver.ui.app.widgets import (
    AssistantMessage,
    Conversation,
    DenoiseCanvas,
    StartupPanel,
    StatusBar,
    UserMessage,
    WithheldAnswer,
    confidence_label,
)

from tests.assistant.sessions import (
    LONG_ANSWER_QUESTION,
    ClockedOutput,
    Recorder,
    ScriptedMicrophone,
    answers,
)

pytestmark = pytest.mark.asyncio
TYPED = Wiring(microphone=False, speech=False, output="none", log=False)


async def until(pilot, condition, timeout: float = 30, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        await pilot.pause(0.05)


async def started(pilot, app: QuicksilverApp) -> Recorder:
    """Wait for the session; record its events from then on."""
    await until(pilot, lambda: app.session is not None, what="the session started")
    recorder = Recorder()
    app.session.subscribe(recorder)
    return recorder


async def ask(pilot, question: str) -> None:
    await pilot.press("slash")
    await pilot.press(*question)
    await pilot.press("enter")


def answers_shown(app: QuicksilverApp) -> list[AssistantMessage]:
    return list(app.query(AssistantMessage))


async def test_a_typed_question_forms_step_by_step_then_joins_the_conversation(reasoner):
    build = functools.partial(build_session, engine=reasoner)
    app = QuicksilverApp(Settings(steps=16), TYPED, build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        events = await started(pilot, app)
        await ask(pilot, "what is 17 times 3")
        await until(pilot, lambda: answers_shown(app), what="the answer shown")
        canvas = app.query_one(DenoiseCanvas)
        (message,) = answers_shown(app)
        (question,) = app.query(UserMessage)
        status = app.query_one(StatusBar)
        await pilot.resize_terminal(80, 24)  # the smallest supported, then back
        await pilot.pause(0.1)
        assert message.region.width > 0 and message.region.y < 24
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.1)

    steps = events.of(Denoise, 1)
    assert [d.step for d in steps] == list(range(1, len(steps) + 1)) and len(steps) > 1
    assert canvas.frames_drawn == {1: len(steps)}  # every step was drawn, none dropped
    assert answers("what is seventeen times three", message.text), message.text
    assert "17 times 3" in str(question.render())
    assert "engine" in status.latency and status.state == "listening"
    assert not canvas.has_class("busy")  # the canvas is put away once the answer settles


@pytest.mark.parametrize("booth", [False, True], ids=["app", "booth"])
async def test_a_withheld_answer_is_shown_dim_under_what_was_said(reasoner, booth):
    """Every answer withheld (``unsure_below`` 1): the app shows "I'm not sure", the
    model's own answer marked as not said with its confidence (not in a booth), and the
    confidence beside the turn's figures."""
    build = functools.partial(build_session, engine=reasoner)
    settings = Settings(steps=16, unsure_below=1.0)
    app = QuicksilverApp(settings, TYPED, booth=booth, build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        events = await started(pilot, app)
        await ask(pilot, "what is 17 times 3")
        await until(pilot, lambda: app.query(WithheldAnswer), what="the withheld answer")
        await until(pilot, lambda: app.query_one(StatusBar).latency, what="the figures")
        if not booth:  # laid out, not only mounted (a loaded machine lays it out later)
            await until(
                pilot, lambda: app.query_one(WithheldAnswer).region.height, what="its layout"
            )
        (message,) = answers_shown(app)
        (withheld,) = app.query(WithheldAnswer)
        shown = withheld.region
        status = app.query_one(StatusBar)

    (ready,) = events.of(AnswerReady, 1)
    label = confidence_label(ready.confidence)
    assert ready.confidence < 1 and ready.withheld == withheld.text
    assert message.text == UNSURE
    assert answers("what is seventeen times three", withheld.text), withheld.text
    assert str(withheld.render()) == f"not said, confidence {label}: {withheld.text}"
    assert f"engine {ready.engine_ms:.0f} ms · confidence {label}" in status.latency
    if booth:  # a visitor sees what was said, not the guess kept back
        assert shown.height == 0
    else:  # dim, under the answer
        assert shown.height > 0 and shown.y > message.region.y
        assert withheld.styles.color != message.styles.color and withheld.styles.text_style.italic


async def test_cancel_stops_the_spoken_answer_and_marks_it(reasoner, voice):
    output = ClockedOutput(voice.sample_rate)
    build = functools.partial(build_session, engine=reasoner, voice=voice, output=output)
    app = QuicksilverApp(Settings(steps=16), TYPED, build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        events = await started(pilot, app)
        await ask(pilot, LONG_ANSWER_QUESTION)
        await until(pilot, lambda: events.of(SpeakingStarted), what="speaking")
        await pilot.pause(0.5)
        await pilot.press("escape")
        await until(pilot, lambda: events.of(TurnCompleted), what="the turn kept")
        (message,) = answers_shown(app)
    (interrupted,) = events.of(Interrupted)
    assert interrupted.dropped and output.stops >= 1
    assert message.has_class("interrupted")
    assert events.of(TurnCompleted)[0].record.interrupted


async def test_mute_and_push_to_talk_keys_drive_the_session(espeak, reasoner, transcriber):
    microphone = ScriptedMicrophone()
    build = functools.partial(
        build_session, engine=reasoner, transcriber=transcriber, microphone=microphone
    )
    wiring = Wiring(microphone=True, output="none", log=False)
    app = QuicksilverApp(Settings(steps=16, hangover_ms=3000), wiring, build=build)
    question = espeak("What is seventeen times three?")
    async with app.run_test(size=(100, 30)) as pilot:
        events = await started(pilot, app)
        status = app.query_one(StatusBar)
        await pilot.press("m")
        await until(pilot, lambda: app.session.muted, what="muted")
        assert status.state == "muted"
        await pilot.press("m")
        await until(pilot, lambda: not app.session.muted, what="unmuted")

        await pilot.press("space")  # the talk key down
        microphone.say(question, after_s=0.2)
        await asyncio.sleep(0.2 + question.size / 16000 + 0.3)
        await pilot.press("space")  # and up: the question ends now, not after 3 s
        await until(pilot, lambda: answers_shown(app), what="the spoken question answered")
        (message,) = answers_shown(app)
    assert answers("what is seventeen times three", message.text), message.text
    assert events.of(TurnCompleted)[0].record.source == "voice"


async def test_without_a_microphone_the_app_offers_typing(reasoner, transcriber):
    build = functools.partial(build_session, engine=reasoner, transcriber=transcriber)
    settings = Settings(steps=8, input_device="no-such-microphone-anywhere")
    app = QuicksilverApp(settings, Wiring(output="none", log=False), build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, app)
        notes = [str(n.render()) for n in app.query(Conversation).first().children]
        assert app.session.microphone is None
        parts = app.query_one(StartupPanel).parts  # what the start-up panel showed
        state, detail = parts["microphone"][:2]
        # no sound server in this process: no device at all; with one: none of that name
        assert state == "failed" and "no input device" in detail
        await ask(pilot, "hello")
        await until(pilot, lambda: answers_shown(app), what="a typed answer")
        (message,) = answers_shown(app)
    assert any("No microphone" in note and "type your questions" in note for note in notes)
    assert answers("hello", message.text)


async def test_booth_mode_starts_afresh_after_idle_and_has_no_settings_keys(reasoner):
    build = functools.partial(build_session, engine=reasoner)
    app = QuicksilverApp(Settings(steps=8, booth_reset_s=1), TYPED, booth=True, build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, app)
        placeholder = app.query_one("#question").placeholder
        await ask(pilot, "hello")
        await until(pilot, lambda: answers_shown(app), what="an answer")
        assert len(app.session.memory.exchanges) == 1
        await pilot.press("escape", "m")  # leave the input; m is no key in a booth
        assert not app.session.muted
        conversation = app.query_one(Conversation)
        await until(pilot, lambda: not conversation.children, timeout=10, what="the reset")
        assert len(app.session.memory.exchanges) == 0
        await until(
            pilot, lambda: app.query_one("#question").placeholder != placeholder, timeout=10,
            what="another example question as the hint",
        )  # fmt: skip
    assert app.has_class("booth")
    assert not app.check_action("quit", ()) and app.check_action("stop", ())  # Ctrl-C quits


async def test_a_partial_transcript_is_replaced_by_the_final_one(reasoner):
    build = functools.partial(build_session, engine=reasoner)
    app = QuicksilverApp(Settings(steps=8), TYPED, build=build)
    async with app.run_test(size=(100, 30)) as pilot:
        await started(pilot, app)
        for event in (SpeechStarted(1), PartialTranscript(1, "what is seven"),
                      PartialTranscript(1, "what is seventeen times")):  # fmt: skip
            app.show_event(event)
        await pilot.pause(0.1)
        (partial,) = app.query(UserMessage)
        assert partial.has_class("partial") and "seventeen times" in str(partial.render())
        assert app.query_one(StatusBar).state == "hearing you"
        app.show_event(FinalTranscript(1, "What is 17 times 3?", "voice"))
        await pilot.pause(0.1)
        (final,) = app.query(UserMessage)
    assert final is partial and not final.has_class("partial")
    assert str(final.render()) == "What is 17 times 3?"
