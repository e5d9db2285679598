"""The engine's commands. Those that do the work run as a user runs them, in a fresh
process of this Python (``python -m quicksilver.ui.cli``, the ``quicksilver`` script's
``main``, whether or not the script's folder is on PATH); the mistakes that stop a command
before any work go through ``main()`` in this process, which is the same code without the
2-3 s of starting Python and torch again."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

import pytest
from quicksilver.engine import Engine
from quicksilver.ui.cli import main

from .conftest import MEMORISED


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "quicksilver.ui.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_here(args: list[str], capsys) -> tuple[int, str]:
    """``main(args)`` in this process: its exit status (argparse's too) and its stderr."""
    try:
        status = main(args)
    except SystemExit as exit:
        status = exit.code
    return status, capsys.readouterr().err


def test_version_and_help():
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("quicksilver 0.")
    help_text = run("--help")
    assert help_text.returncode == 0
    for command in ("ask", "train"):
        assert command in help_text.stdout


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, trained_engine):
    folder = tmp_path_factory.mktemp("ckpt")
    trained_engine.save(folder)
    return folder


def test_ask_json_has_the_answer_and_its_cost(checkpoint):
    result = run(
        "ask",
        MEMORISED[0].conversation,
        "--model",
        str(checkpoint),
        "--json",
        "--steps",
        "8",
        "--context",
        "",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    figures = {"answer", "thinking", "steps", "forward_passes", "latency_ms", "confidence"}
    assert set(data) == figures | {"unsure_below"}
    assert 0 < data["confidence"] <= 1 and data["unsure_below"] is None  # measured none
    assert data["answer"] == MEMORISED[0].answer
    assert data["thinking"] == MEMORISED[0].thinking
    assert data["forward_passes"] == data["steps"] == 8
    assert data["latency_ms"] > 0


def test_ask_shows_thinking_on_request(checkpoint):
    ask = ("ask", MEMORISED[0].conversation, "--model", str(checkpoint), "--context", "")
    plain = run(*ask)
    shown = run(*ask, "--show-thinking")
    assert plain.stdout.strip() == MEMORISED[0].answer
    assert MEMORISED[0].thinking in shown.stdout and MEMORISED[0].answer in shown.stdout


def test_ask_says_when_the_model_wrote_no_answer(silent_model):
    """``ask`` prints what the model wrote, nothing here, and says on stderr what to try."""
    plain = run("ask", "tell me 187 divided by 11", "--model", str(silent_model))
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == ""
    assert "wrote no spoken answer" in plain.stderr and "--steps" in plain.stderr
    asked = run("ask", "hi", "--model", str(silent_model), "--json")
    assert json.loads(asked.stdout)["answer"] == ""  # the engine's own answer, unaltered
    assert asked.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["ask", "hi", "--model", "/nonexistent/model"],
            "no checkpoint folder at /nonexistent/model",
        ),
        (["ask", "   ", "--model", "CKPT"], "question is empty"),
        (
            ["ask", "hi", "--model", "CKPT", "--steps", "0"],
            "steps must be a whole number of at least 1",
        ),
        (["train", "/nonexistent.jsonl", "--out", "OUT"], "no training data"),
    ],
)
def test_mistakes_are_one_clear_line(checkpoint, tmp_path, capsys, args, message):
    args = [
        str(checkpoint) if a == "CKPT" else str(tmp_path / "o") if a == "OUT" else a for a in args
    ]
    status, stderr = run_here(args, capsys)  # an escaping exception fails the test
    assert status == 2
    assert message in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def test_train_then_ask(tmp_path):
    data = tmp_path / "data.jsonl"
    rows = [
        {"question": e.conversation, "thinking": e.thinking, "answer": e.answer} for e in MEMORISED
    ]
    data.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    out = tmp_path / "model"
    args = [
        "train",
        str(data),
        "--out",
        str(out),
        "--steps",
        "6",
        "--batch-size",
        "4",
        "--d-model",
        "32",
        "--layers",
        "1",
        "--heads",
        "2",
        "--context",
        "64",
        "--device",
        "cpu",
    ]
    result = run(*args)
    assert result.returncode == 0, result.stderr
    assert "trained to step 6/6" in result.stdout
    engine = Engine.load(out)
    assert engine.model.config.d_model == 32 and not engine.model.config.prompt_sees_reply
    again = run(*args)  # resuming a finished run does nothing and says so
    assert "trained to step 6/6" in again.stdout
    asked = json.loads(run("ask", "hello", "--model", str(out), "--json", "--steps", "8").stdout)
    assert asked["forward_passes"] == asked["steps"] == 8


def test_train_reports_a_malformed_line(tmp_path, capsys):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"question": "hi", "answer": "yo"}\n{"question": "no answer"}\n')
    status, stderr = run_here(["train", str(data), "--out", str(tmp_path / "m")], capsys)
    assert status == 2
    assert "bad.jsonl:2" in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_ask_tells_the_model_todays_date_by_default(checkpoint, capsys, monkeypatch):
    """By default the model is first told today's date in its own words
    (``Engine.date_context``); ``--context`` replaces that sentence and "" drops it."""
    told = []
    answer = Engine.answer

    def recording(engine, messages, **options):
        told.append([m["content"] for m in messages if m["role"] == "system"])
        return answer(engine, messages, **options)

    monkeypatch.setattr(Engine, "date_context", lambda engine, today: f"DAY {today}")
    monkeypatch.setattr(Engine, "answer", recording)
    for context in ([], ["--context", "Be brief."], ["--context", ""]):
        assert main(["ask", "what day is it", "--model", str(checkpoint), *context]) == 0
    assert told == [[f"DAY {date.today()}"], ["Be brief."], []]
