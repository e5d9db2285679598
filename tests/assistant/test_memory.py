"""Memory: the date first, as many recent turns as the token budget allows, the question."""

from __future__ import annotations

from datetime import date, datetime

from quicksilver.assistant.memory import Memory, today_context
from quicksilver.assistant.transcript import TurnRecord
from quicksilver.engine import Tokenizer

SUNDAY = datetime(2026, 11, 29, 14, 3)
DATE = "Today is Sunday, November 29, 2026."  # 6 words


def words(text: str) -> int:
    return len(text.split())


def turn(n: int, user: str | None = None, answer: str | None = None, **fields) -> TurnRecord:
    """A turn whose user text and answer are two words each."""
    return TurnRecord(n, user or f"question {n}", answer=answer or f"answer {n}", **fields)


def contents(messages: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in messages]


def test_the_date_sentence_is_the_one_the_model_was_trained_on():
    assert today_context(date(2026, 11, 29)) == DATE
    assert today_context(SUNDAY) == DATE
    assert today_context(date(2027, 2, 1)) == "Today is Monday, February 1, 2027."
    from quicksilver.ui import cli

    assert cli.today_context is today_context  # the ask command tells the model the same


def test_a_first_question_gets_the_date_and_the_question():
    messages = Memory(words).messages("what day is it", SUNDAY)
    assert messages == [
        {"role": "system", "content": DATE},
        {"role": "user", "content": "what day is it"},
    ]


def test_the_oldest_turns_are_dropped_first_to_fit_the_budget():
    fixed = words(DATE) + words("and now what")  # 6 + 3, always sent
    memory = Memory(words, context_tokens=fixed + 2 * 4)  # room for two 4-word turns
    for n in range(1, 6):
        memory.add(turn(n))
    messages = memory.messages("and now what", SUNDAY)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert contents(messages) == [
        DATE,
        "question 4",
        "answer 4",
        "question 5",
        "answer 5",
        "and now what",
    ]

    memory.context_tokens = fixed + 2 * 4 - 1  # one token short of the second turn
    assert contents(memory.messages("and now what", SUNDAY))[1:3] == ["question 5", "answer 5"]


def test_a_turn_that_does_not_fit_hides_the_older_ones_too():
    memory = Memory(words, context_tokens=6 + 1 + 4 + 4)
    memory.add(turn(1))
    memory.add(turn(2, answer="a long answer of many words that do not fit"))
    memory.add(turn(3))
    # turn 1 would fit after turn 3, but a conversation with a hole in it misleads the model
    assert contents(memory.messages("why", SUNDAY)) == [DATE, "question 3", "answer 3", "why"]


def test_the_date_and_question_are_sent_even_over_budget():
    memory = Memory(words, context_tokens=1)
    memory.add(turn(1))
    question = "a question far longer than the whole budget"
    assert contents(memory.messages(question, SUNDAY)) == [DATE, question]


def test_at_most_max_turns_are_kept():
    memory = Memory(words, context_tokens=10_000, max_turns=2)
    for n in range(1, 5):
        memory.add(turn(n))
    assert contents(memory.messages("q", SUNDAY))[1::2] == ["question 3", "question 4", "q"]
    forgetful = Memory(words, max_turns=0)
    forgetful.add(turn(1))
    assert len(forgetful.messages("q", SUNDAY)) == 2
    memory.clear()
    assert len(memory.messages("q", SUNDAY)) == 2


def test_an_interrupted_turn_is_remembered_only_as_far_as_it_was_spoken():
    memory = Memory(words)
    memory.add(turn(1, answer="one two three four five", spoken="one two", interrupted=True))
    memory.add(turn(2, answer="nothing heard", spoken="", interrupted=True))  # not remembered
    memory.add(turn(3, answer="all of it", spoken=""))  # finished: the whole answer was said
    assert contents(memory.messages("go on", SUNDAY)) == [
        DATE,
        "question 1",
        "one two",
        "question 3",
        "all of it",
        "go on",
    ]


def test_the_conversation_is_one_the_engine_tokenizer_accepts():
    tokenizer = Tokenizer.byte_level()
    memory = Memory(lambda text: len(tokenizer.encode(text)), context_tokens=120)
    for n in range(1, 10):
        memory.add(turn(n, answer=f"{n} times 3 is {n * 3}."))
    messages = memory.messages("and 10 times 3", SUNDAY)
    history = messages[1:-1]
    assert 0 < len(history) < 18 and history[-1]["content"] == "9 times 3 is 27."
    assert sum(len(tokenizer.encode(m["content"])) for m in messages) <= 120
    assert tokenizer.prompt_ids(messages)  # roles and order are a valid engine conversation
