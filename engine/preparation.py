"""Prompt preparations: what a model does to a conversation before its chat template.

Some models were trained on prompts in a form of their own: a small one may want spoken
questions in one canonical wording, or the question's numbers repeated at fixed
positions, or the date told in one exact sentence. That is the model's business, not
the engine's, so a checkpoint only names its preparation
(``config.json["chat_template"]["preparation"]``) and the package that ships the model
registers it under the ``quicksilver.prompt_preparations`` entry points. The engine
looks the name up when it builds the tokenizer and imports nothing of that package.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .tokenizer import Message, Tokenizer

ENTRY_POINTS = "quicksilver.prompt_preparations"


class PromptPreparation(Protocol):
    """A model's own preparation of its prompts (an object registered by name)."""

    def prepare(self, messages: Sequence[Message], tokenizer: Tokenizer) -> list[Message]:
        """The checked messages as the model was trained to read them."""
        ...

    def date_context(self, today: datetime.date) -> str | None:
        """The sentence that tells the model today's date, worded as in its training;
        None when it was not trained to be told the date."""
        ...


def load_preparation(name: str) -> PromptPreparation:
    """The preparation registered as ``name``; a clear error when none is installed."""
    registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}
    if name not in registered:
        installed = ", ".join(sorted(registered)) or "none"
        raise ValueError(
            f"the checkpoint's chat template names the prompt preparation {name!r}, which no "
            f"installed package registers (entry points {ENTRY_POINTS!r}: {installed}); "
            "install the package that ships this model (for Quicksilver's own models, "
            "`pip install quicksilver`)"
        )
    return registered[name].load()
