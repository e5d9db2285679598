"""What a face can tell a session: typed, frozen commands.

A face (the command line, the Textual app, the websocket server, a test) never calls
into the pipeline; it sends one of these with :meth:`Session.send` and learns what
happened from the event stream (:mod:`quicksilver.assistant.events`), so every face
sees the same conversation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Command:
    """Base class of everything a face can send."""


@dataclass(frozen=True)
class SubmitText(Command):
    """A typed question; answered after any typed or file turn still queued before it."""

    text: str


@dataclass(frozen=True, eq=False)
class SubmitAudio(Command):
    """Recorded speech (mono float32 at ``sample_rate``); every utterance in it is a turn."""

    samples: np.ndarray
    sample_rate: int = 16000


@dataclass(frozen=True)
class CancelTurn(Command):
    """Stop the current turn now (its thinking or its speech); it is kept as interrupted."""


@dataclass(frozen=True)
class Mute(Command):
    """Stop hearing the microphone (an open utterance is dropped)."""


@dataclass(frozen=True)
class Unmute(Command):
    """Hear the microphone again."""


@dataclass(frozen=True)
class PushToTalkDown(Command):
    """The talk key is down: the user speaks now (over the assistant, muted or not)."""


@dataclass(frozen=True)
class PushToTalkUp(Command):
    """The talk key is up: what was said since it went down is the question, at once."""


@dataclass(frozen=True)
class ResetConversation(Command):
    """Forget the conversation (a demo booth's next visitor); the current turn stops."""


@dataclass(frozen=True)
class UpdateSettings(Command):
    """Change settings by name (``{"steps": 8}``); effective from the next turn."""

    changes: Mapping[str, Any] = field(default_factory=dict)
