"""What the engine is told each turn: today's date, the recent conversation, the question.

The engine has a small context, so earlier turns go in newest first until the token
budget is spent; the oldest fall out. The assistant's side of a turn is what the user
actually heard: after a barge-in the unplayed rest of the answer is forgotten, so the
model never builds on words the user never got.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from .transcript import TurnRecord

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


def today_context(today: date | None = None) -> str:
    """The date sentence the model was trained on, in English whatever the locale."""
    today = today or date.today()
    return f"Today is {DAYS[today.weekday()]}, {MONTHS[today.month - 1]} {today.day}, {today.year}."


@dataclass(frozen=True)
class Exchange:
    """One remembered turn: what the user said and what the assistant was heard saying."""

    user: str
    assistant: str


class Memory:
    """The conversation so far, cut to a token budget when the engine is asked.

    ``count_tokens`` measures text as the engine does, e.g.
    ``lambda text: len(engine.tokenizer.encode(text))``. ``context_tokens`` bounds the
    content of every message together (date, earlier turns, question); the date and the
    question are always sent, even when they alone exceed it. At most ``max_turns``
    turns are kept at all.
    """

    def __init__(
        self, count_tokens: Callable[[str], int], context_tokens: int = 192, max_turns: int = 8
    ) -> None:
        self.count_tokens = count_tokens
        self.context_tokens = context_tokens
        self.exchanges: deque[Exchange] = deque(maxlen=max_turns)

    def add(self, record: TurnRecord) -> None:
        """Remember a completed turn; an interrupted one only as far as it was spoken.

        A turn where the assistant said nothing (barged in before its first word) is not
        remembered: the conversation then reads as the user going on, not as an answer.
        """
        said = record.spoken if record.interrupted else record.answer
        if record.user.strip() and said.strip():
            self.exchanges.append(Exchange(record.user, said))

    def clear(self) -> None:
        self.exchanges.clear()

    def messages(self, question: str, today: date) -> list[dict[str, str]]:
        """The engine conversation: the date, the turns that fit the budget, the question."""
        system = today_context(today)
        spent = self.count_tokens(system) + self.count_tokens(question)
        kept: list[Exchange] = []
        for exchange in reversed(self.exchanges):
            spent += self.count_tokens(exchange.user) + self.count_tokens(exchange.assistant)
            if spent > self.context_tokens:
                break
            kept.append(exchange)
        history = [
            {"role": role, "content": text}
            for exchange in reversed(kept)
            for role, text in (("user", exchange.user), ("assistant", exchange.assistant))
        ]
        return [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": question},
        ]
