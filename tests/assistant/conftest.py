"""Helpers for the assistant tests: run the ``quicksilver`` command as a user does."""

from __future__ import annotations

import os
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
        [sys.executable, "-m", "ui.cli", *args],
        cwd=REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
