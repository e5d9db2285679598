"""Memory: the date first (for a model that reads one), as many recent turns as the whole
prompt's token budget allows, the question."""

from __future__ import annotations

from quicksilver.assistant.memory import Memory
from quicksilver.assistant.transcript import TurnRecord
from quicksilver.engine import Engine, ModelConfig

DATE = "Today is Sunday, November 29, 2026."  # 6 words


def words(messages: list[dict[str, str]]) -> int:
    """A prompt's size in words, one more per message for its markup."""
    return sum(len(m["content"].split()) + 1 for m in messages)


def turn(n: int, user: str | None = None, answer: str | None = None, **fields) -> TurnRecord:
    """A turn whose user text and answer are two words each (three with markup)."""
    return TurnRecord(n, user or f"question {n}", answer=answer or f"answer {n}", **fields)


def contents(messages: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in messages]


def test_a_first_question_gets_the_date_and_the_question():
    assert Memory(words).messages("what day is it", DATE) == [
        {"role": "system", "content": DATE},
        {"role": "user", "content": "what day is it"},
    ]
    # a model that reads no date gets none
    assert Memory(words).messages("hi", None) == [{"role": "user", "content": "hi"}]


def test_the_oldest_turns_are_dropped_first_to_fit_the_budget():
    fixed = 7 + 4  # the date and "and now what", with their markup: always sent
    memory = Memory(words, context_tokens=fixed + 2 * 6)  # room for two turns of 6
    for n in range(1, 6):
        memory.add(turn(n))
    messages = memory.messages("and now what", DATE)
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
    assert words(messages) == memory.budget

    memory.resize(fixed + 2 * 6 - 1, max_turns=8)  # one token short of the second turn
    assert contents(memory.messages("and now what", DATE))[1:3] == ["question 5", "answer 5"]


def test_the_model_s_room_caps_the_budget():
    memory = Memory(words, context_tokens=1000, room=7 + 2 + 6)
    for n in range(1, 4):
        memory.add(turn(n))
    assert memory.budget == 15
    assert contents(memory.messages("q", DATE)) == [DATE, "question 3", "answer 3", "q"]


def test_a_turn_that_does_not_fit_hides_the_older_ones_too():
    memory = Memory(words, context_tokens=7 + 2 + 6 + 6)
    memory.add(turn(1))
    memory.add(turn(2, answer="a long answer of many words that do not fit"))
    memory.add(turn(3))
    # turn 1 would fit after turn 3, but a conversation with a hole in it misleads the model
    assert contents(memory.messages("why", DATE)) == [DATE, "question 3", "answer 3", "why"]


def test_the_date_and_question_are_sent_even_over_budget():
    memory = Memory(words, context_tokens=1)
    memory.add(turn(1))
    question = "a question far longer than the whole budget"
    assert contents(memory.messages(question, DATE)) == [DATE, question]


def test_at_most_max_turns_are_kept():
    memory = Memory(words, context_tokens=10_000, max_turns=2)
    for n in range(1, 5):
        memory.add(turn(n))
    assert contents(memory.messages("q", DATE))[1::2] == ["question 3", "question 4", "q"]
    memory.resize(10_000, max_turns=1)  # the newest are kept
    assert contents(memory.messages("q", DATE))[1::2] == ["question 4", "q"]
    forgetful = Memory(words, max_turns=0)
    forgetful.add(turn(1))
    assert len(forgetful.messages("q", DATE)) == 2


def test_an_interrupted_turn_is_remembered_only_as_far_as_it_was_spoken():
    memory = Memory(words)
    memory.add(turn(1, answer="one two three four five", spoken="one two", interrupted=True))
    memory.add(turn(2, answer="nothing heard", spoken="", interrupted=True))  # not remembered
    memory.add(turn(3, answer="all of it", spoken=""))  # finished: the whole answer was said
    assert contents(memory.messages("go on", DATE)) == [
        DATE,
        "question 1",
        "one two",
        "question 3",
        "all of it",
        "go on",
    ]


def test_the_budget_is_counted_as_the_engine_counts_its_prompt():
    engine = Engine.random(ModelConfig(d_model=32, n_layers=1, n_heads=2, max_seq_len=512))
    memory = Memory(engine.count_prompt_tokens, context_tokens=120)
    for n in range(1, 10):
        memory.add(turn(n, answer=f"{n} times 3 is {n * 3}."))
    messages = memory.messages("and 10 times 3", DATE)
    history = messages[1:-1]
    assert 0 < len(history) < 18 and history[-1]["content"] == "9 times 3 is 27."
    assert len(engine.tokenizer.prompt_ids(messages)) <= 120
    older = memory.exchanges[-len(history) // 2 - 1]  # the newest turn left out
    one_more = [
        messages[0],
        {"role": "user", "content": older.user},
        {"role": "assistant", "content": older.assistant},
        *messages[1:],
    ]
    assert engine.count_prompt_tokens(one_more) > 120
