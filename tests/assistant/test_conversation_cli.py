"""``quicksilver`` with no command: typed and spoken conversations, and the faults a new
user meets first, each told in one clear line."""

from __future__ import annotations

import io
import json
import os
import pty
import queue
import subprocess
import sys
import threading

import numpy as np
from quicksilver.assistant.events import Denoise
from quicksilver.assistant.transcript import TranscriptLog, TurnRecord
from quicksilver.ui.conversation import EventPrinter

from tests.assistant.conftest import REPO, clean_env, press_ctrl_c, quicksilver
from tests.conftest import silence


def no_sound_env(tmp_path) -> dict[str, str]:
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    env.pop("PULSE_SERVER", None)  # no sound server: PortAudio sees no device
    return env


def test_no_microphone_says_so_and_suggests_typing(tmp_path):
    result = quicksilver(env=no_sound_env(tmp_path))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "no input device found" in line and "quicksilver --text" in line


def test_a_missing_model_is_named_in_one_line(tmp_path):
    missing = tmp_path / "no-such-model"
    result = quicksilver("--text", "--mute", "--model", str(missing), env=no_sound_env(tmp_path))
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("quicksilver: cannot load the model") and str(missing) in line


def test_a_bad_setting_names_where_it_came_from(tmp_path):
    env = no_sound_env(tmp_path) | {"QUICKSILVER_STEPS": "many"}
    result = quicksilver("--text", env=env)
    assert result.returncode == 2
    assert "QUICKSILVER_STEPS" in result.stderr and "whole number" in result.stderr


def test_typed_questions_are_answered_without_any_sound_device(reasoner, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "quicksilver.ui.cli", "--text", "--steps", "8"],
        cwd=REPO, env=no_sound_env(tmp_path), input="hello\n", capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "you: hello" in lines
    assert any(line.startswith("quicksilver: ") for line in lines)
    assert any("engine" in line and "8 steps" in line for line in lines)
    assert "no speaker" in result.stderr


def test_quicksilver_converses_by_voice_and_stops_on_ctrl_c(pulse, espeak, reasoner, tmp_path):
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    env["PULSE_SERVER"] = pulse.address
    with pulse.feeding_mic() as feed:
        process = subprocess.Popen(
            [sys.executable, "-m", "quicksilver.ui.cli", "--input-device", "pulse",
             "--output-device", "pulse"],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        printed: queue.Queue[str] = queue.Queue()
        reader = threading.Thread(target=lambda: [*map(printed.put, process.stdout)], daemon=True)
        reader.start()
        try:
            lines = []
            while not any(line.startswith("  [") for line in lines):  # the turn's figures
                try:
                    line = printed.get(timeout=90)
                except queue.Empty:
                    raise AssertionError(f"no turn within 90 s; printed {lines}") from None
                lines.append(line)
                if line.startswith("Listening"):
                    feed.say(np.concatenate([silence(0.3), espeak("Hello.")]))
            press_ctrl_c(process)
        finally:
            if process.poll() is None:
                process.kill()
    assert any(line.lower().startswith("you: hello") for line in lines), lines
    assert any(line.startswith("quicksilver: ") for line in lines), lines
    assert "ms voice-to-voice" in lines[-1]
    records, _ = TranscriptLog(tmp_path / "data" / "quicksilver" / "history.jsonl").read_recent(5)
    assert [r.source for r in records] == ["voice"]


def test_typed_questions_on_a_terminal_are_not_echoed_twice(reasoner, tmp_path):
    """On a terminal the typed line is already on screen: only the answer is printed."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "quicksilver.ui.cli", "--text", "--steps", "8"],
        cwd=REPO, env=no_sound_env(tmp_path), stdin=terminal, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    os.close(terminal)
    try:
        os.write(controller, b"hello\n")
        lines = [process.stdout.readline(), process.stdout.readline()]
        os.write(controller, b"\x04")  # Ctrl-D
        rest, stderr = process.communicate(timeout=60)
    finally:
        os.close(controller)
        if process.poll() is None:
            process.kill()
    printed = "".join(lines) + rest
    assert process.returncode == 0, stderr
    assert "you: hello" not in printed and printed.count("quicksilver: ") == 1, printed


def test_ctrl_c_leaves_no_half_drawn_status_line():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    printer = EventPrinter(out)
    printer(Denoise(1, 3, 16, "", "6 ░░░░ 7 is ░░.", 6, 3.5))
    assert "thinking 3/16" in out.getvalue()
    printer.close()  # what the command does on Ctrl-C
    assert out.getvalue().endswith("\r\033[K")


def test_output_errors_and_broken_pipes_are_one_line_not_tracebacks(tmp_path):
    env = no_sound_env(tmp_path)
    folder = quicksilver("say", "hi", "-o", str(tmp_path), env=env)
    assert folder.returncode == 2 and "is a folder; give a file name" in folder.stderr
    nowhere = tmp_path / "missing" / "hi.wav"
    missing = quicksilver("say", "hi", "-o", str(nowhere), env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    for result in (folder, missing):
        assert len(result.stderr.splitlines()) == 1, result.stderr
    piped = subprocess.run(
        f"{sys.executable} -m quicksilver.ui.cli config | head -3", shell=True, cwd=REPO,
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert len(piped.stdout.splitlines()) == 3 and piped.stderr == "", piped.stderr


def test_history_of_a_damaged_log_warns_once(tmp_path):
    log = tmp_path / "data" / "quicksilver" / "history.jsonl"
    log.parent.mkdir(parents=True)
    good = TurnRecord(1, "hello", answer="Hello!").to_dict()
    log.write_text("not json\n" * 5 + json.dumps(good) + "\n{broken\n")
    result = quicksilver("history", env=no_sound_env(tmp_path))
    assert result.returncode == 0
    (warning,) = result.stderr.splitlines()
    assert "line 1" in warning and "and 5 more like it" in warning
    assert "you: hello" in result.stdout
