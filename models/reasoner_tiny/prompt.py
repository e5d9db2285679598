"""Reasoner-tiny's prompt preparation: its prompts in the form its corpus was written in.

Registered under the ``quicksilver.prompt_preparations`` entry points (pyproject.toml)
and named by the checkpoint's ``config.json``, so the engine applies it without
importing this package. Each user message is normalised as a spoken question
(``normalise.py``); the question being answered ends with its operand slots
(``slots.py``); the date is told in the one sentence the corpus uses. The corpus goes
through the same functions, so training and answering agree byte for byte.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .normalise import normalise_spoken
from .slots import operand_slots, without_letter_label

if TYPE_CHECKING:
    from quicksilver.engine import Tokenizer

# English whatever the locale: the model only knows these names.
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def spoken_date(day: dt.date) -> str:
    """A date as the model says it: "Wednesday, December 2, 2026"."""
    return f"{DAYS[day.weekday()]}, {MONTHS[day.month - 1]} {day.day}, {day.year}"


def date_context(today: dt.date) -> str:
    """The system sentence that tells the model the date: "Today is Wednesday, …"."""
    return f"Today is {spoken_date(today)}."


@dataclass(frozen=True)
class Preparation:
    """Spoken-question normalisation, with or without operand slots (builds made before
    the slots existed read their prompts without them); ``last_words``: the word slots
    take the question's last spelled-out words; ``letter``: the slots hold the letter asked
    about (``operand_slots``); ``frames``: the asked word and letter stand out from the
    frame (frame words give way in the word fields, "letter" before a letter is dropped
    from the question once the slots have read it)."""

    slots: bool = True
    last_words: bool = False
    letter: bool = False
    frames: bool = False

    def prepare(
        self, messages: Sequence[dict[str, str]], tokenizer: Tokenizer
    ) -> list[dict[str, str]]:
        prepared = [
            {**m, "content": normalise_spoken(m["content"])} if m["role"] == "user" else dict(m)
            for m in messages
        ]
        if self.slots:
            question = prepared[-1]["content"]
            block = operand_slots(
                question, tokenizer.spells_out, self.last_words, self.letter, self.frames
            )
            if self.frames:
                question = without_letter_label(question)
            prepared[-1]["content"] = f"{question} {block}"
        return prepared

    def date_context(self, today: dt.date) -> str:
        return date_context(today)


REASONER_TINY = Preparation()
REASONER_TINY_2 = Preparation(last_words=True)  # fresh runs since the shipped build
REASONER_TINY_LETTERS = Preparation(last_words=True, letter=True)  # the letters expert
REASONER_TINY_LETTERS_2 = Preparation(last_words=True, letter=True, frames=True)
BEFORE_SLOTS = Preparation(slots=False)
