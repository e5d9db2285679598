"""The real thing: ``quicksilver`` in tmux on the virtual sound server, read off the
captured screen as a person reads it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from quicksilver.assistant.transcript import TranscriptLog

from tests.assistant.conftest import REPO, clean_env
from tests.conftest import silence


class Tmux:
    """One tmux server of the test's own (its own socket), one window."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.command = [
            shutil.which("tmux") or pytest.fail("tmux is missing: apt-get install tmux")
        ]
        self.command += ["-S", str(folder / "tmux.socket")]
        self.env = env

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.command, *args], env=self.env, capture_output=True, text=True, timeout=30
        )

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "quicksilver").stdout

    def wait_for(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text.lower() not in (screen := self.screen()).lower():
            assert time.monotonic() < deadline, f"{text!r} not on the screen:\n{screen}"
            time.sleep(0.2)
        return screen

    def running(self) -> bool:
        return self.run("has-session", "-t", "quicksilver").returncode == 0


def test_quicksilver_on_a_terminal_answers_a_spoken_and_a_typed_question(
    pulse, espeak, reasoner, tmp_path
):
    env = clean_env(
        XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"),
        PULSE_SERVER=pulse.address, TERM="xterm-256color",
    )  # fmt: skip
    tmux = Tmux(tmp_path, env)
    command = (
        f"cd {REPO} && {sys.executable} -m quicksilver.ui.cli --input-device pulse "
        "--output-device pulse"
    )
    with pulse.feeding_mic() as microphone:
        started = tmux.run(
            "new-session", "-d", "-s", "quicksilver", "-x", "100", "-y", "30", command
        )
        assert started.returncode == 0, started.stderr
        try:
            tmux.wait_for("listening")  # the session is up: the status bar says so
            microphone.say(np.concatenate([silence(0.3), espeak("Thank you.")]))
            tmux.wait_for("thank you")
            spoken = tmux.wait_for("welcome")  # the answer, in the conversation
            tmux.run("send-keys", "-t", "quicksilver", "/")
            time.sleep(0.3)  # as a person types: the question box has the keys from here
            tmux.run("send-keys", "-t", "quicksilver", "hello", "Enter")
            typed = tmux.wait_for("what can I do for you")
            assert any(line.strip() == "hello" for line in typed.splitlines()), typed
            tmux.run("send-keys", "-t", "quicksilver", "Escape")
            time.sleep(0.5)  # alone, or the terminal reads Escape and q as Alt+q
            tmux.run("send-keys", "-t", "quicksilver", "q")
            deadline = time.monotonic() + 20
            while tmux.running():
                assert time.monotonic() < deadline, f"q did not quit:\n{tmux.screen()}"
                time.sleep(0.2)
        finally:
            tmux.run("kill-server")
    assert "Traceback" not in spoken + typed
    records, _ = TranscriptLog(tmp_path / "data" / "quicksilver" / "history.jsonl").read_recent(9)
    assert [r.source for r in records] == ["voice", "text"]  # the log complete after q
