"""The session fed typed questions: the shipped model, real logs, real faults."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import AnswerReady, Denoise, Error, FinalTranscript, TurnMetrics
from quicksilver.assistant.stages import NO_ANSWER
from quicksilver.assistant.transcript import TranscriptLog
from quicksilver.engine import Engine

from tests.assistant.conftest import REPO, clean_env, press_ctrl_c
from tests.assistant.sessions import Recorder, answers, ask_all, typed_session


def turn_types(recorder: Recorder, turn: int) -> list[str]:
    """The event types of one turn, runs of ``Denoise`` folded into one."""
    return [kind for kind, _ in itertools.groupby(recorder.types(turn))]


@pytest.mark.asyncio
async def test_typed_questions_are_answered_in_order_and_logged(reasoner, tmp_path):
    log = TranscriptLog(tmp_path / "history.jsonl")
    session = typed_session(reasoner, Settings(steps=16, log_path=log.path))

    recorder = await ask_all(session, ["hello", "thank you"])

    assert recorder.types(0) == ["Listening"]
    for turn in (1, 2):
        assert turn_types(recorder, turn) == [
            "FinalTranscript",
            "Denoise",
            "AnswerReady",
            "TurnMetrics",
            "TurnCompleted",
            "Listening",
        ]
        drafts = recorder.of(Denoise, turn)
        # one draft per pass: 16 at most (the shipped sampler settles padding, so a short
        # reply may finish in fewer)
        assert [d.step for d in drafts] == list(range(1, len(drafts) + 1))
        assert 1 < len(drafts) <= 16 and all(d.total_steps == 16 for d in drafts)
        assert drafts[0].masked > drafts[-1].masked == 0
        metrics = recorder.of(TurnMetrics, turn)[0]
        assert metrics.steps == 16 and metrics.engine_ms > 0
        assert metrics.voice_to_voice_ms is None and metrics.endpoint_ms is None
    questions = [e.text for e in recorder.of(FinalTranscript)]
    replies = [e.text for e in recorder.of(AnswerReady)]
    assert questions == ["hello", "thank you"]
    assert answers("hello", replies[0]), replies[0]
    assert answers("thank you", replies[1]), replies[1]  # asked after the first exchange
    records, skipped = log.read_recent(10)
    assert skipped == []
    assert [(r.turn, r.user, r.answer, r.source, r.interrupted) for r in records] == [
        (1, "hello", replies[0], "text", False),
        (2, "thank you", replies[1], "text", False),
    ]
    assert records[0].metrics["steps"] == 16
    assert [e.user for e in session.memory.exchanges] == ["hello", "thank you"]


@pytest.mark.asyncio
async def test_a_model_that_writes_no_answer_gets_an_apology_shown_and_logged(
    silent_model, tmp_path
):
    log = TranscriptLog(tmp_path / "history.jsonl")
    session = typed_session(Engine.load(silent_model), Settings(steps=8, log_path=log.path))

    recorder = await ask_all(session, ["tell me 187 divided by 11"])

    drafts = recorder.of(Denoise, 1)
    assert drafts and all(d.text == "" for d in drafts)  # the model's own empty reply
    assert [e.text for e in recorder.of(AnswerReady)] == [NO_ANSWER]
    records, _ = log.read_recent(10)
    assert [(r.user, r.answer) for r in records] == [("tell me 187 divided by 11", NO_ANSWER)]


@pytest.mark.asyncio
async def test_a_failing_stage_is_reported_and_the_conversation_goes_on(reasoner, tmp_path):
    """A question longer than the model's context makes the engine raise mid-turn; a log
    on a full disk fails to write. Both become Error events; the next question is answered."""
    session = typed_session(reasoner, Settings(steps=8, log_path="/dev/full"))
    too_long = "tell me about the moon and the stars " * 60

    recorder = await ask_all(session, [too_long, "hello"])

    engine_error, log_error = recorder.of(Error)
    assert (engine_error.turn, engine_error.stage) == (1, "think")
    assert "context" in engine_error.message and engine_error.hint
    assert (log_error.turn, log_error.stage) == (2, "log")
    assert "No space left" in log_error.message and "disk space" in log_error.hint
    assert turn_types(recorder, 1) == ["FinalTranscript", "Error", "Listening"]
    reply = recorder.of(AnswerReady, 2)[0].text
    assert answers("hello", reply), reply
    # the log's failure comes back from its writer thread after the turn: reported once
    assert recorder.types(2)[-2:] == ["Listening", "Error"]


@pytest.mark.asyncio
async def test_a_long_conversation_always_fits_the_model_context(reasoner):
    """History fills the prompt up to what leaves room for the reply canvas, never more."""
    questions = [
        "what is seventeen times three", "hello there how are you doing today",
        "what is twelve plus nine", "how do you spell apple", "which is bigger seven or twelve",
        "what is fifty minus eight", "thank you very much", "who are you", "what can you do",
        "what is forty divided by five", "how many centimeters are in two meters",
    ]  # fmt: skip
    session = typed_session(reasoner, Settings(steps=4))
    recorder = await ask_all(session, questions)
    assert recorder.of(Error) == []
    assert len(recorder.of(AnswerReady)) == len(questions)
    assert len(session.memory.exchanges) > 1


def wait_for_lines(path: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().count("\n") >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} lines in {timeout} s")


def start_typed_session(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """``quicksilver --text`` as a user starts it, its log under a private data folder."""
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path))
    env.pop("PULSE_SERVER", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "quicksilver.ui.cli", "--text", "--mute", "--steps", "8"],
        cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    return process, tmp_path / "data" / "quicksilver" / "history.jsonl"


def ask(process: subprocess.Popen, question: str) -> None:
    process.stdin.write(question + "\n")
    process.stdin.flush()


def test_kill_9_mid_conversation_keeps_every_completed_turn(reasoner, tmp_path):
    process, log_path = start_typed_session(tmp_path)
    try:
        for count, question in enumerate(["hello", "thank you"], start=1):
            ask(process, question)
            wait_for_lines(log_path, count)
        ask(process, "what is seventeen times three")
        time.sleep(0.05)  # mid-turn
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    records, skipped = TranscriptLog(log_path).read_recent(10)
    assert skipped == []
    assert [r.user for r in records[:2]] == ["hello", "thank you"]
    assert all(not r.interrupted and r.source == "text" for r in records)


def test_ctrl_c_mid_turn_stops_cleanly_and_keeps_the_log(reasoner, tmp_path):
    process, log_path = start_typed_session(tmp_path)
    try:
        ask(process, "hello")
        wait_for_lines(log_path, 1)
        ask(process, "thank you")
        time.sleep(0.05)
        press_ctrl_c(process)
    finally:
        if process.poll() is None:
            process.kill()
    records, skipped = TranscriptLog(log_path).read_recent(10)
    assert skipped == [] and records[0].user == "hello"
