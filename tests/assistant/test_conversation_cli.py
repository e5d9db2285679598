"""``quicksilver`` with no command: the faults a new user meets first get one clear line."""

from __future__ import annotations

import subprocess
import sys

from tests.assistant.conftest import REPO, clean_env, quicksilver


def no_sound_env(tmp_path) -> dict[str, str]:
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    env.pop("PULSE_SERVER", None)  # no sound server: PortAudio sees no device
    return env


def test_no_microphone_says_so_and_suggests_typing(tmp_path):
    result = quicksilver("--no-ui", env=no_sound_env(tmp_path))
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
        [sys.executable, "-m", "ui.cli", "--text", "--steps", "8"],
        cwd=REPO, env=no_sound_env(tmp_path), input="hello\n", capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "you: hello" in lines
    assert any(line.startswith("quicksilver: ") for line in lines)
    assert any("engine" in line and "8 steps" in line for line in lines)
    assert "no speaker" in result.stderr
