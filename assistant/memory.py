"""What the engine is told each turn: the date (for a model that reads one), the recent
conversation, the question.

The engine has a small context, so earlier turns go in newest first while the whole
prompt fits the budget; the oldest fall out. The assistant's side of a turn is what
the user actually heard: after a barge-in the unplayed rest of the answer is
forgotten, so the model never builds on words the user never got.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from quicksilver.assistant.transcript import TurnRecord

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Exchange:
    """One remembered turn: what the user said and what the assistant was heard saying."""

    user: str
    assistant: str


class Memory:
    """The conversation so far, cut to a token budget when the engine is asked.

    ``count_prompt`` measures a whole conversation as the model will see it (the
    engine's ``count_prompt_tokens``), so the model's own prompt preparation is never
    repeated here. ``context_tokens`` bounds that prompt, and so does ``room`` (what the
    model's context leaves beside its reply canvas); the date and the question are
    always sent, even when they alone exceed it. At most ``max_turns`` turns are kept.
    """

    def __init__(
        self,
        count_prompt: Callable[[Messages], int],
        context_tokens: int = 192,
        max_turns: int = 8,
        room: int | None = None,
    ) -> None:
        self.count_prompt = count_prompt
        self.context_tokens = context_tokens
        self.room = room
        self.exchanges: deque[Exchange] = deque(maxlen=max_turns)

    @property
    def budget(self) -> int:
        """The most prompt tokens a question with its history may take."""
        return self.context_tokens if self.room is None else min(self.context_tokens, self.room)

    def resize(self, context_tokens: int, max_turns: int) -> None:
        """New budgets, effective from the next question; the newest turns are kept."""
        self.context_tokens = context_tokens
        self.exchanges = deque(self.exchanges, maxlen=max_turns)

    def clear(self) -> None:
        self.exchanges.clear()

    def add(self, record: TurnRecord) -> None:
        """Remember a completed turn; an interrupted one only as far as it was spoken.

        A turn where the assistant said nothing (barged in before its first word) is not
        remembered: the conversation then reads as the user going on, not as an answer.
        """
        said = record.spoken if record.interrupted else record.answer
        if record.user.strip() and said.strip():
            self.exchanges.append(Exchange(record.user, said))

    def messages(self, question: str, system: str | None) -> Messages:
        """The engine conversation: ``system`` (if any), the turns that fit, the question."""
        head = [{"role": "system", "content": system}] if system else []
        tail = [{"role": "user", "content": question}]
        history: Messages = []
        for exchange in reversed(self.exchanges):
            turn = [
                {"role": "user", "content": exchange.user},
                {"role": "assistant", "content": exchange.assistant},
            ]
            if self.count_prompt([*head, *turn, *history, *tail]) > self.budget:
                break
            history = turn + history
        return [*head, *history, *tail]
