"""What a face asks of a session before it is built: where questions come from and
answers go (:class:`Wiring`), and how each part is doing as it loads (:class:`Progress`).

Kept apart from the factory, which imports the engine and the audio parts, so a face
can describe its session and paint its screen before any of them is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Output = Literal["speaker", "file", "none"]


@dataclass(frozen=True)
class Progress:
    """How one part of a starting session is doing, for a face to show as it happens.

    ``state``: ``loading``, ``ready``, ``failed`` (the session cannot start: a
    :class:`StartupError` follows) or ``fallback`` (the session goes on without it; the
    detail says how).
    """

    component: str  # engine, whisper, voice, microphone, speaker, output
    state: Literal["loading", "ready", "failed", "fallback"]
    detail: str = ""


@dataclass(frozen=True)
class Wiring:
    """Where a session's questions come from and where its answers go.

    ``microphone``: listen on ``settings.input_device``. ``speech``: load Whisper even
    without a microphone, for :class:`~quicksilver.assistant.commands.SubmitAudio`.
    ``output``: play answers on ``settings.output_device``, write them all to
    ``output_path`` (a WAV file), or keep them as text; an output given to
    :func:`build_session` takes the place of all three.
    """

    microphone: bool = True
    speech: bool = True
    output: Output = "speaker"
    output_path: Path | None = None
    log: bool = True  # append completed turns to settings.log_path
