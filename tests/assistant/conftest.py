"""Helpers for the assistant tests: run the ``quicksilver`` command as a user does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any QUICKSILVER_* setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUICKSILVER_")}
    env.update(extra)
    return env


def quicksilver(*args: str, env: Mapping[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "quicksilver.ui.cli", *args],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def press_ctrl_c(process: subprocess.Popen) -> str:
    """Stop ``process`` as a user's Ctrl-C does; check it quit cleanly; return its stderr."""
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=20)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    return stderr
