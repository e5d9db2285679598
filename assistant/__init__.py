"""The conversation: one session core that every face drives.

Build a session with :func:`build_session` from :class:`Settings` (defaults →
``config.toml`` → ``QUICKSILVER_*`` → flags, see :func:`load_settings`), run it, send
it commands and subscribe to its events::

    settings, _ = load_settings({})
    session = build_session(settings, Wiring(microphone=False, output="none"))
    session.subscribe(print)
    session.send(SubmitText("what is 17 times 3"))
"""

import importlib

from quicksilver.assistant.commands import (
    CancelTurn,
    Command,
    Mute,
    PushToTalkDown,
    PushToTalkUp,
    ResetConversation,
    SubmitAudio,
    SubmitText,
    Unmute,
    UpdateSettings,
)
from quicksilver.assistant.config import Settings, load_settings
from quicksilver.assistant.wiring import Progress, Wiring

# Reached only when used, so a face that only reads settings does not import torch.
_LAZY = {
    "Session": "session",
    "StartupError": "loading",
    "build_session": "factory",
}


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
    return getattr(module, name)


__all__ = [
    "CancelTurn",
    "Command",
    "Mute",
    "Progress",
    "PushToTalkDown",
    "PushToTalkUp",
    "ResetConversation",
    "Session",
    "Settings",
    "StartupError",
    "SubmitAudio",
    "SubmitText",
    "Unmute",
    "UpdateSettings",
    "Wiring",
    "build_session",
    "load_settings",
]
