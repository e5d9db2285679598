"""The reasoner-tiny corpus: questions as speech transcripts, short reasoning, a spoken answer.

Every reasoning format is built so that each token depends on a few tokens before it:
numbers are worked one column at a time from the ones digit with the carry or borrow
written out (``7+5+0=12`` means digit 2, carry 1), words are spelled letter by letter,
dates move one unit at a time. Number formats start from the operands as the prompt's
slots show them (``017+255``, ``slots.py``) and keep a fixed width, so every digit has
one place per skill. Answers are plain sentences Piper reads well.

Held-out items never reach training: a number pair, word or date belongs to the
held-out side when its hash says so (``is_held_out``; a unit's own size, "1 hour is 60
minutes.", is always trained), and each skill has phrasings used only for evaluation.
``training_examples`` and ``held_out_set`` draw from disjoint sides.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import functools
import random
import re
import zlib
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from quicksilver.audio.textnorm import ONES, TENS

from .normalise import normalise_spoken
from .prompt import DAYS, MONTHS, date_context, spoken_date
from .slots import INTEGER_WIDTH, numbers_in, padded

HELD_OUT_SHARE = 8  # one item in 8 is kept for evaluation


@dataclass(frozen=True)
class Item:
    """One question with its reasoning and answer.

    ``context`` is the system message; ``history`` holds earlier (question, spoken answer)
    exchanges, rendered between it and the question the way the assistant's memory does.
    """

    skill: str
    question: str
    thinking: str
    answer: str
    context: str = ""
    history: tuple[tuple[str, str], ...] = ()

    def messages(self) -> list[dict[str, str]]:
        system = [{"role": "system", "content": self.context}] if self.context else []
        earlier = [
            {"role": role, "content": text}
            for question, answer in self.history
            for role, text in (("user", question), ("assistant", answer))
        ]
        return [*system, *earlier, {"role": "user", "content": self.question}]


def is_held_out(key: str) -> bool:
    """Whether an item's content (numbers, word, date) is reserved for evaluation."""
    return zlib.crc32(key.encode()) % HELD_OUT_SHARE == 0


# --------------------------------------------------------------------------- spoken form


def number_words(n: int) -> str:
    """0 ≤ n < 10,000 as a person says it, "and" included ("three hundred and five"), in
    the number words the speech side uses (audio.textnorm)."""
    if n < 20:
        return ONES[n]
    if n < 100:
        return TENS[n // 10] + ("" if n % 10 == 0 else "-" + ONES[n % 10])
    if n < 1000:
        rest = "" if n % 100 == 0 else " and " + number_words(n % 100)
        return ONES[n // 100] + " hundred" + rest
    rest = "" if n % 1000 == 0 else (" and " if n % 1000 < 100 else " ") + number_words(n % 1000)
    return number_words(n // 1000) + " thousand" + rest


def spoken(n: int | str, rng: random.Random) -> str:
    """A number as speech-to-text writes it: usually digits, sometimes words."""
    if isinstance(n, str):  # a decimal
        if rng.random() < 0.2:
            whole, frac = n.split(".")
            return number_words(int(whole)) + " point " + " ".join(ONES[int(c)] for c in frac)
        return n
    return number_words(n) if rng.random() < 0.2 else str(n)


OPENING_FILLERS = ("um", "uh", "so", "hey", "okay")  # what a transcript may start with
CLOSING_FILLERS = ("please", "for me")  # and end with


def transcript(text: str, rng: random.Random) -> str:
    """Dress a question the way a transcript arrives: case, punctuation, a filler."""
    if rng.random() < 0.15:
        text = rng.choice(OPENING_FILLERS) + " " + text
    if rng.random() < 0.1:
        text = text + " " + rng.choice(CLOSING_FILLERS)
    if rng.random() < 0.5:
        text = text[0].upper() + text[1:]
    return text + rng.choice(["?", "?", ".", ""])


# --------------------------------------------------------------------------- arithmetic


def _digits(n: int, width: int) -> list[int]:
    return [(n // 10**i) % 10 for i in range(width)]  # ones first


# Every arithmetic format has a fixed width, counted from the operand slots' three digits
# (slots.py), so each canvas position keeps one role whatever the operands' lengths.
WIDTH = INTEGER_WIDTH


def add_columns(a: int, b: int, width: int = WIDTH) -> str:
    steps, carry = [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        total = x + y + carry
        steps.append(f"{x}+{y}+{carry}={total:02d}")
        carry = total // 10
    return " ".join(steps)


def sub_columns(a: int, b: int, width: int = WIDTH) -> str:
    """a ≥ b; ``x-y-c=BR``: digit R, borrow B for the next column."""
    steps, borrow = [], 0
    for x, y in zip(_digits(a, width), _digits(b, width), strict=True):
        value = x - y - borrow
        nxt = 1 if value < 0 else 0
        steps.append(f"{x}-{y}-{borrow}={nxt}{value + 10 * nxt}")
        borrow = nxt
    return " ".join(steps)


def mul_row(a: int, d: int) -> str:
    """a < 100 × one digit d, column by column (``x*d+c=PQ``), then the three-digit row."""
    steps, carry = [], 0
    for x in _digits(a, 2):
        total = x * d + carry
        steps.append(f"{x}*{d}+{carry}={total:02d}")
        carry = total // 10
    return f"{' '.join(steps)} → {a * d:03d}"


def mul_thinking(a: int, b: int) -> str:
    """a, b < 100: one row per digit of b, then the rows added in four columns."""
    ones, tens = b % 10, b // 10
    low, high = a * ones, a * tens * 10
    return (
        f"{padded(a)}*{padded(b)}: {mul_row(a, ones)} | {mul_row(a, tens)} | "
        f"{low:04d}+{high:04d}: {add_columns(low, high, 4)} → {a * b}"
    )


def div_thinking(n: int, d: int) -> str:
    """Long division over the three digits of n: ``current/d=QrR``."""
    steps, current = [], 0
    for digit in padded(n):
        current = current * 10 + int(digit)
        steps.append(f"{current:03d}/{d:02d}={current // d}r{current % d:02d}")
        current %= d
    return f"{padded(n)}/{padded(d)}: {' '.join(steps)} → {n // d}"


def addition(rng: random.Random, held_out: bool) -> Item:
    phrasing = _phrase(rng, held_out, ADD_PHRASES)
    # The held-out key is the pair as the answer says it ("add 2 to 94": 94 plus 2).
    first, second = _pair(rng, held_out, "add", lambda: (_num(rng, 999), _num(rng, 999)))
    a, b = (second, first) if phrasing.startswith("!") else (first, second)
    question = phrasing.lstrip("!").format(a=spoken(a, rng), b=spoken(b, rng))
    thinking = f"{padded(first)}+{padded(second)}: {add_columns(first, second)} → {first + second}"
    return Item(
        "addition",
        transcript(question, rng),
        thinking,
        f"{first} plus {second} is {first + second}.",
    )


def subtraction(rng: random.Random, held_out: bool) -> Item:
    a, b = _pair(rng, held_out, "sub", lambda: (_num(rng, 999), _num(rng, 999)))
    phrasing = _phrase(rng, held_out, SUB_PHRASES)
    question = phrasing.format(a=spoken(a, rng), b=spoken(b, rng))
    pa, pb = padded(a), padded(b)
    if a >= b:
        thinking, result = f"{pa}-{pb}: {sub_columns(a, b)} → {a - b}", str(a - b)
    else:
        thinking = f"{pa}-{pb} = -({pb}-{pa}): {sub_columns(b, a)} → -{b - a}"
        result = f"minus {b - a}"
    return Item("subtraction", transcript(question, rng), thinking, f"{a} minus {b} is {result}.")


def multiplication(rng: random.Random, held_out: bool) -> Item:
    a, b = _pair(rng, held_out, "mul", lambda: (_num(rng, 99), _num(rng, 99)))
    question = _phrase(rng, held_out, MUL_PHRASES).format(a=spoken(a, rng), b=spoken(b, rng))
    return Item(
        "multiplication",
        transcript(question, rng),
        mul_thinking(a, b),
        f"{a} times {b} is {a * b}.",
    )


def division(rng: random.Random, held_out: bool) -> Item:
    def draw() -> tuple[int, int]:
        d = rng.randint(2, 12)
        return rng.randint(1, 999 // d) * d, d

    n, d = _pair(rng, held_out, "div", draw)
    question = _phrase(rng, held_out, DIV_PHRASES).format(a=spoken(n, rng), b=spoken(d, rng))
    return Item(
        "division",
        transcript(question, rng),
        div_thinking(n, d),
        f"{n} divided by {d} is {n // d}.",
    )


# --------------------------------------------------------------------------- words


# Of letter counts, the share that ask how many letters a word has ("how many letters
# are in elephant"), the count with no letter asked.
WORD_LENGTH_SHARE = 0.25


def letter_count(rng: random.Random, held_out: bool, word: str | None = None) -> Item:
    word = word or _word(rng, held_out)
    if rng.random() < WORD_LENGTH_SHARE:
        return _word_length(rng, held_out, word)
    letter = rng.choice(word) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    count, steps = 0, []
    for ch in word:
        count += ch == letter
        steps.append(f"{ch}{count}")
    question = _phrase(rng, held_out, COUNT_PHRASES).format(l=letter, w=word)
    # the word first, as a word's length answers ("Library has 7 letters."): the number
    # and the word sit on the same canvas positions in both kinds
    if count == 0:
        answer = f"{word.capitalize()} has no {letter.upper()}'s."
    elif count == 1:
        answer = f"{word.capitalize()} has 1 {letter.upper()}."
    else:
        answer = f"{word.capitalize()} has {count} {letter.upper()}'s."
    return Item(
        "letter count", transcript(question, rng), f"{letter}: {' '.join(steps)} → {count}", answer
    )


def _word_length(rng: random.Random, held_out: bool, word: str) -> Item:
    """ "how many letters are in elephant": every letter counted, as a letter count
    counts the asked one (``_: e1 l2 e3 … t8 → 8``).

    The two kinds share the expert and its canvas, so they share its positions too: the
    reasoning names no letter in the one-token field where a count names its letter,
    and both kinds answer word first ("Elephant has 8 letters.", "Elephant has 2 E's."),
    so each letter counted and the number answered sit where the other kind puts them."""
    question = _phrase(rng, held_out, LENGTH_PHRASES).format(w=word)
    counted = " ".join(f"{letter}{n}" for n, letter in enumerate(word, 1))
    return Item(
        "letter count",
        transcript(question, rng),
        f"_: {counted} → {len(word)}",
        f"{word.capitalize()} has {len(word)} letters.",
    )


def spelling(rng: random.Random, held_out: bool, word: str | None = None) -> Item:
    word = word or _word(rng, held_out)
    question = _phrase(rng, held_out, SPELL_PHRASES).format(w=word)
    letters = ", ".join(word.upper())
    return Item(
        "spelling",
        transcript(question, rng),
        "-".join(word),
        f"{word.capitalize()} is spelled {letters}.",
    )


def backwards(rng: random.Random, held_out: bool, word: str | None = None) -> Item:
    word = word or _word(rng, held_out)
    question = _phrase(rng, held_out, BACKWARDS_PHRASES).format(w=word)
    thinking = f"{'-'.join(word)} → {'-'.join(reversed(word))}"
    letters = ", ".join(reversed(word.upper()))
    return Item(
        "backwards",
        transcript(question, rng),
        thinking,
        f"{word.capitalize()} backwards is {letters}.",
    )


def first_last(rng: random.Random, held_out: bool, word: str | None = None) -> Item:
    word = word or _word(rng, held_out)
    which = rng.choice(["first", "last"])
    phrases = FIRST_PHRASES if which == "first" else LAST_PHRASES
    question = _phrase(rng, held_out, phrases).format(w=word)
    letter = word[0] if which == "first" else word[-1]
    return Item(
        "first/last letter",
        transcript(question, rng),
        "-".join(word),
        f"The {which} letter of {word} is {letter.upper()}.",
    )


# --------------------------------------------------------------------------- comparing


def _decimal(rng: random.Random) -> str:
    return f"{rng.randint(0, 20)}.{rng.randint(0, 99) if rng.random() < 0.5 else rng.randint(0, 9)}"


def compare_thinking(x: str, y: str) -> tuple[str, int]:
    """The numbers as their slots show them, compared from the left digit; (reasoning,
    sign of x - y)."""
    decimals = "." in x + y
    ax, ay = padded(x, decimals), padded(y, decimals)
    steps, sign = [], 0
    for p, q in zip(ax, ay, strict=True):
        if p == ".":
            continue
        if p == q:
            steps.append(f"{p}={q}")
            continue
        sign = 1 if p > q else -1
        steps.append(f"{p}{'>' if sign > 0 else '<'}{q}")
        break
    return f"{ax} vs {ay}: {' '.join(steps)}", sign


def comparison(rng: random.Random, held_out: bool) -> Item:
    def draw() -> tuple[str, str]:
        if rng.random() < 0.5:
            return _decimal(rng), _decimal(rng)
        return str(_num(rng, 999)), str(_num(rng, 999))

    x, y = _pair(rng, held_out, "cmp", draw)
    kind = rng.choice(["bigger", "smaller", "is bigger", "is smaller"])
    phrases = {
        "bigger": BIGGER_PHRASES,
        "smaller": SMALLER_PHRASES,
        "is bigger": IS_BIGGER_PHRASES,
        "is smaller": IS_SMALLER_PHRASES,
    }[kind]
    question = _phrase(rng, held_out, phrases).format(
        a=spoken(_as_number(x), rng), b=spoken(_as_number(y), rng)
    )
    thinking, sign = compare_thinking(x, y)
    big, small = (x, y) if sign >= 0 else (y, x)
    thinking += f" → {big}"
    if sign == 0:
        answer = f"{x} and {y} are equal."
    elif kind == "bigger":
        answer = f"{big} is bigger than {small}."
    elif kind == "smaller":
        answer = f"{small} is smaller than {big}."
    else:
        # A yes or no hangs on the word asked as well as on the numbers: the reasoning
        # names that word and its verdict before the answer says either.
        asked = kind.removeprefix("is ")
        holds = sign > 0 if asked == "bigger" else sign < 0
        thinking += f" | {asked}? {'yes' if holds else 'no'}"
        relation = "bigger" if sign > 0 else "smaller"
        answer = f"{'Yes' if holds else 'No'}, {x} is {relation} than {y}."
    return Item("comparison", transcript(question, rng), thinking, answer)


def ordering(rng: random.Random, held_out: bool) -> Item:
    def draw() -> tuple[int, ...]:
        """Three or four distinct numbers (the prompt's slots hold four), each one or two
        digits long alike: "sort 3, 1 and 2" is asked as well as "sort 37, 80 and 18"."""
        numbers: list[int] = []
        count = rng.randint(3, 4)
        while len(numbers) < count:
            if (number := _num(rng, 99)) not in numbers:
                numbers.append(number)
        return tuple(numbers)

    numbers = list(_pair(rng, held_out, "ord", draw))
    listed = ", ".join(spoken(n, rng) for n in numbers[:-1]) + " and " + spoken(numbers[-1], rng)
    question = _phrase(rng, held_out, ORDER_PHRASES).format(n=listed)
    steps, left = [], list(numbers)
    while len(left) > 1:
        smallest = min(left)
        steps.append(f"{' '.join(map(padded, left))}: min {padded(smallest)}")
        left.remove(smallest)
    result = sorted(numbers)
    thinking = " | ".join(steps) + f" → {' '.join(map(str, result))}"
    answer = "From smallest to largest: " + ", ".join(map(str, result)) + "."
    return Item("ordering", transcript(question, rng), thinking, answer)


# --------------------------------------------------------------------------- conversions

UNITS = [  # (from, to, factor)
    ("hour", "minute", 60),
    ("minute", "second", 60),
    ("day", "hour", 24),
    ("week", "day", 7),
    ("kilometer", "meter", 1000),
    ("meter", "centimeter", 100),
    ("centimeter", "millimeter", 10),
    ("kilogram", "gram", 1000),
    ("meter", "millimeter", 1000),
    ("kilometer", "centimeter", 100000),
]
# Of training's conversions, the share that ask a unit's own size ("how many days are in
# a week"): what people ask most, and a fact to know rather than a product to work out.
UNIT_SIZE_SHARE = 0.1
# The share asked into the bigger unit ("how many weeks is 21 days"), an exact number of
# them, the amount within the operand slots' three digits: units whose size divides
# into that many (not a kilometer's 1000 meters).
INTO_BIGGER_SHARE = 0.25
SPLIT_UNITS = [i for i, (_, _, factor) in enumerate(UNITS) if factor <= 100]


def _unit_size(value: tuple[int, int]) -> bool:
    """Whether a conversion asks one unit's size: always trained, never held out (the
    hash of (unit, 1) would otherwise hold it out for the first eight units at once)."""
    return value[1] == 1


def _units(name: str, n: int) -> str:
    return name if n == 1 else name + "s"


def conversion(rng: random.Random, held_out: bool) -> Item:
    into_bigger = rng.random() < INTO_BIGGER_SHARE

    def draw() -> tuple[int, int]:
        if into_bigger:
            unit = rng.choice(SPLIT_UNITS)
            return unit, rng.randint(1, min(99, 999 // UNITS[unit][2]))
        unit = rng.randrange(len(UNITS))
        if not held_out and rng.random() < UNIT_SIZE_SHARE:
            return unit, 1
        return unit, rng.randint(1, 99)

    # One key for both directions: a held-out (unit, n) is never trained either way.
    unit, n = _pair(rng, held_out, "conv", draw, always_trained=_unit_size)
    if into_bigger:
        return _into_bigger_unit(rng, held_out, unit, n)
    source, target, factor = UNITS[unit]
    amount = spoken(n, rng)
    if n == 1 and rng.random() < 0.5:
        amount = "an" if source == "hour" else "a"  # "how many minutes in an hour"
    question = _phrase(rng, held_out, CONVERT_PHRASES).format(
        n=amount, a=_units(source, n), b=target + "s"
    )
    zeros = len(str(factor)) - len(str(factor).rstrip("0"))
    core = factor // 10**zeros
    thinking = mul_thinking(n, core) if core > 1 else f"{padded(n)}*001 → {n}"
    if zeros:
        thinking += f" → {n * factor}"
    thinking = f"×{factor}: {thinking}"
    result = n * factor
    answer = f"{n} {_units(source, n)} is {result} {_units(target, result)}."
    return Item("conversion", transcript(question, rng), thinking, answer)


def _into_bigger_unit(rng: random.Random, held_out: bool, unit: int, n: int) -> Item:
    """ "how many weeks is 21 days": the amount divided by the unit's size in the long
    division the division skill writes, answered amount first, as asked."""
    big, small, factor = UNITS[unit]
    amount = n * factor
    question = _phrase(rng, held_out, CONVERT_PHRASES).format(
        n=spoken(amount, rng), a=_units(small, amount), b=big + "s"
    )
    thinking = f"÷{factor}: {div_thinking(amount, factor)}"
    answer = f"{amount} {_units(small, amount)} is {n} {_units(big, n)}."
    return Item("conversion", transcript(question, rng), thinking, answer)


# --------------------------------------------------------------------------- calendar


def step_days(today: dt.date, n: int) -> str:
    """Reasoning for today + n days, in steps the arithmetic skills already take.

    The weekday: n mod 7, then the days after today named one by one (each follows from
    the one before). The date: today's day plus n in columns, then, while that passes the
    month's end, the month's length taken off in columns and the next month named::

        monday+3 tuesday wednesday thursday; 30+03: 0+3+0=03 3+0+0=03 → 33 -30: 3-0-0=03
        3-3-0=00 → 3 may
    """
    weekday = today.weekday()
    later_days = [DAYS[(weekday + k) % 7].lower() for k in range(1, n % 7 + 1)]
    weekdays = " ".join([f"{DAYS[weekday].lower()}+{n % 7}", *later_days])
    day, month, year = today.day + n, today.month, today.year
    steps = [f"{today.day:02d}+{n:02d}: {add_columns(today.day, n, 2)} → {day}"]
    while day > (length := calendar.monthrange(year, month)[1]):
        month, year = (1, year + 1) if month == 12 else (month + 1, year)
        next_month = MONTHS[month - 1].lower()[:3]
        steps.append(f"-{length}: {sub_columns(day, length, 2)} → {day - length} {next_month}")
        day -= length
    return f"{weekdays}; {' '.join(steps)}"


# "Today" is any day of the century a user's clock may say; years, months and leap days
# all vary, so the model learns to read the date it is told rather than a few years.
FIRST_DAY, LAST_DAY = dt.date(2000, 1, 1), dt.date(2099, 12, 31)


def _today(rng: random.Random, held_out: bool) -> dt.date:
    """A day from FIRST_DAY to LAST_DAY; held-out days are never 'today' in training."""
    span = (LAST_DAY - FIRST_DAY).days
    (offset,) = _pair(rng, held_out, "cal", lambda: (rng.randint(0, span),))
    return FIRST_DAY + dt.timedelta(days=offset)


def calendar_item(rng: random.Random, held_out: bool) -> Item:
    today, n = _today(rng, held_out), rng.randint(2, 40)
    context = date_context(today)
    kind = rng.choice(["weekday", "date", "tomorrow", "in"])
    phrases = CALENDAR_PHRASES[kind]
    question = _phrase(rng, held_out, phrases).format(n=spoken(n, rng))
    # Some questions about today (ANOTHER_DAY_SHARE) ask about a day the reasoning cannot
    # reach (yesterday, a holiday, days ago) and are declined. That choice and its phrasing
    # come from a stream of their own, so the main stream draws what it drew before, and
    # every other held-out item (validation and report draws, the spoken set) stays; the
    # draws in training's phrasings changed with the phrasings added to today's lists.
    elsewhere = random.Random(f"another day:{today}:{n}:{held_out}")
    if kind in ("weekday", "date") and elsewhere.random() < ANOTHER_DAY_SHARE:
        question = _phrase(elsewhere, held_out, ANOTHER_DAY_PHRASES).format(
            n=spoken(n, elsewhere), holiday=elsewhere.choice(HOLIDAYS)
        )
        return Item("calendar", transcript(question, rng), "another day", ANOTHER_DAY, context)
    weekday, month = DAYS[today.weekday()], MONTHS[today.month - 1]
    today_words = f"today {weekday.lower()} {today.day} {month.lower()} {today.year}"
    if kind in ("weekday", "date"):
        # "what day is it" gets the whole date, as tomorrow's and later days' questions do
        # (and as people's assistants answer it): one answer for today, whichever word
        # the question used, so "what date is it" is never told the weekday alone
        answer = f"Today is {spoken_date(today)}."
        return Item("calendar", transcript(question, rng), today_words, answer, context)
    days = 1 if kind == "tomorrow" else n
    later = today + dt.timedelta(days=days)
    thinking = f"{today_words}; +{days}: {step_days(today, days)}"
    answer = (
        f"Tomorrow is {spoken_date(later)}."
        if kind == "tomorrow"
        else f"In {days} days it will be {spoken_date(later)}."
    )
    return Item("calendar", transcript(question, rng), thinking, answer, context)


# Said for a day before today or a named day: the reasoning reaches only today and the days
# after it, and a fluent wrong date is worse than saying so
ANOTHER_DAY = "Sorry, I can tell today's date and the days after it, not that one yet."
ANOTHER_DAY_SHARE = 0.25  # of the questions about today
HOLIDAYS = ("christmas", "new year's day", "easter", "halloween", "my birthday", "thanksgiving")


# --------------------------------------------------------------------------- conversation

ABILITIES = "I can do arithmetic, spell words, compare numbers, convert units and tell the date."
CHAT = {
    "greeting": "Hello! What can I do for you?",
    "thanks": "You're welcome!",
    "identity": "I'm Quicksilver, a voice assistant that thinks with a diffusion language model.",
    "abilities": ABILITIES,
    "farewell": "Goodbye! Talk to you soon.",
}
REFUSAL = "Sorry, I can't answer that yet. " + ABILITIES


def conversation(rng: random.Random, held_out: bool) -> Item:
    kind = rng.choice(list(CHAT))
    question = _phrase(rng, held_out, CHAT_PHRASES[kind])
    return Item("conversation", transcript(question, rng), kind, CHAT[kind])


def refusal(rng: random.Random, held_out: bool) -> Item:
    template = _phrase(rng, held_out, OUT_OF_SCOPE)
    filler = rng.choice(OUT_OF_SCOPE_FILLS[held_out])
    question = template.format(x=filler, n=spoken(rng.randint(2, 99), rng))
    return Item("out of scope", transcript(question, rng), "out of scope", REFUSAL)


# --------------------------------------------------------------------------- phrasings
# (train phrasings, held-out phrasings); "!" first swaps the operands' order in the answer.

ADD_PHRASES = (
    [
        "what is {a} plus {b}",
        "{a} plus {b}",
        "what's {a} + {b}",
        "add {a} and {b}",
        "what do you get if you add {a} and {b}",
        "can you add {a} and {b}",
        "what is the sum of {a} and {b}",
        "!add {a} to {b}",
        "how much is {a} plus {b}",
        "what's the total of {a} and {b}",
        "work out {a} plus {b}",
        "figure out {a} plus {b}",
        "give me {a} plus {b}",
        "what does {a} plus {b} make",
        "{a} plus {b} equals what",
    ],
    ["calculate {a} plus {b}", "tell me {a} plus {b}", "what's {a} plus {b}"],
)
SUB_PHRASES = (
    [
        "what is {a} minus {b}",
        "{a} minus {b}",
        "what's {a} - {b}",
        "{a} take away {b}",
        "how much is {a} minus {b}",
        "what do you get if you take {b} from {a}",
        "can you do {a} minus {b}",
        "work out {a} minus {b}",
        "figure out {a} minus {b}",
        "give me {a} minus {b}",
        "subtract {b} from {a}",
        "what does {a} minus {b} make",
        "{a} minus {b} equals what",
    ],
    ["calculate {a} minus {b}", "tell me {a} minus {b}", "what's {a} minus {b}"],
)
MUL_PHRASES = (
    [
        "what is {a} times {b}",
        "{a} times {b}",
        "what's {a} x {b}",
        "multiply {a} by {b}",
        "{a} multiplied by {b}",
        "what is {a} multiplied by {b}",
        "how much is {a} times {b}",
        "work out {a} times {b}",
        "figure out {a} times {b}",
        "give me {a} times {b}",
        "what's the product of {a} and {b}",
        "what does {a} times {b} make",
        "{a} times {b} equals what",
    ],
    ["calculate {a} times {b}", "tell me {a} times {b}", "what's {a} times {b}"],
)
DIV_PHRASES = (
    [
        "what is {a} divided by {b}",
        "{a} divided by {b}",
        "divide {a} by {b}",
        "what's {a} / {b}",
        "how much is {a} divided by {b}",
        "work out {a} divided by {b}",
        "figure out {a} divided by {b}",
        "give me {a} divided by {b}",
        "what does {a} divided by {b} make",
        "{a} divided by {b} equals what",
    ],
    ["calculate {a} divided by {b}", "tell me {a} divided by {b}", "what's {a} divided by {b}"],
)
COUNT_PHRASES = (
    [
        "how many {l}'s are in {w}",
        "how many times does the letter {l} appear in {w}",
        "count the {l}'s in {w}",
        "how many {l}'s does {w} have",
        "how many letter {l}'s are there in {w}",
        "give me the number of {l}'s in {w}",
        "what's the count of {l}'s in {w}",
        "how many {l}'s occur in {w}",
        "in {w} how many {l}'s are there",
    ],
    ["how many {l}'s are there in {w}", "count the letter {l} in {w}"],
)
LENGTH_PHRASES = (
    [
        "how many letters are in {w}",
        "how many letters does {w} have",
        "how many letters in {w}",
        "how long is {w}",
        "what is the length of {w}",
        "{w} has how many letters",
        "give me the number of letters in {w}",
        "how many letters make up {w}",
    ],
    ["how many letters are there in {w}", "tell me how many letters {w} has"],
)
SPELL_PHRASES = (
    [
        "how do you spell {w}",
        "spell {w}",
        "can you spell {w}",
        "how is {w} spelled",
        "spell out {w}",
        "what's the spelling of {w}",
        "give me the spelling of {w}",
        "please spell {w} for me",
        "let me hear you spell {w}",
    ],
    ["spell the word {w}", "how do I spell {w}"],
)
BACKWARDS_PHRASES = (
    [
        "spell {w} backwards",
        "what is {w} spelled backwards",
        "can you spell {w} backwards",
        "say {w} backwards",
        "spell {w} in reverse",
        "reverse the letters of {w}",
        "what's {w} backwards",
        "give me {w} backwards",
        "read {w} backwards",
    ],
    ["spell the word {w} backwards", "how do you spell {w} backwards"],
)
FIRST_PHRASES = (
    [
        "what is the first letter of {w}",
        "what letter does {w} start with",
        "first letter of {w}",
        "what does {w} start with",
        "what does {w} begin with",
        "which letter comes first in {w}",
        "give me the first letter of {w}",
        "{w} starts with what letter",
        "name the first letter in {w}",
        "what's the opening letter of {w}",
    ],
    ["which letter does {w} begin with", "what's the first letter of {w}"],
)
LAST_PHRASES = (
    [
        "what is the last letter of {w}",
        "what letter does {w} end with",
        "last letter of {w}",
        "what does {w} end with",
        "which letter comes last in {w}",
        "give me the last letter of {w}",
        "{w} ends with what letter",
        "name the last letter in {w}",
        "what's the final letter of {w}",
    ],
    ["which letter does {w} end with", "what's the last letter of {w}"],
)
BIGGER_PHRASES = (
    [
        "which is bigger {a} or {b}",
        "which is larger {a} or {b}",
        "what is bigger {a} or {b}",
        "which number is bigger {a} or {b}",
        "which is the bigger number {a} or {b}",
        "{a} or {b} which is bigger",
        "out of {a} and {b} which is larger",
        "which is higher {a} or {b}",
        "what's bigger {a} or {b}",
    ],
    ["which is greater {a} or {b}", "which one is bigger {a} or {b}"],
)
SMALLER_PHRASES = (
    [
        "which is smaller {a} or {b}",
        "which is less {a} or {b}",
        "which number is smaller {a} or {b}",
        "which is the smaller number {a} or {b}",
        "{a} or {b} which is smaller",
        "which is lower {a} or {b}",
        "what's smaller {a} or {b}",
    ],
    ["which one is smaller {a} or {b}", "what is smaller {a} or {b}"],
)
IS_BIGGER_PHRASES = (
    [
        "is {a} bigger than {b}",
        "is {a} larger than {b}",
        "is {a} more than {b}",
        "is {a} higher than {b}",
        "is {a} bigger than {b} or not",
        "is {a} greater than {b}",
    ],
    ["is the number {a} bigger than {b}"],
)
IS_SMALLER_PHRASES = (
    [
        "is {a} smaller than {b}",
        "is {a} less than {b}",
        "is {a} lower than {b}",
        "is {a} smaller than {b} or not",
    ],
    ["is the number {a} smaller than {b}"],
)
ORDER_PHRASES = (
    [
        "put {n} in order",
        "sort {n}",
        "order {n}",
        "order {n} from smallest to largest",
        "arrange {n} from smallest to biggest",
        "list {n} from smallest to largest",
        "sort {n} from low to high",
        "can you sort {n}",
        "arrange {n} in order",
        "put {n} in increasing order",
    ],
    ["sort these numbers {n}", "put these in order {n}"],
)
CONVERT_PHRASES = (
    [
        "how many {b} are in {n} {a}",
        "convert {n} {a} to {b}",
        "how many {b} is {n} {a}",
        "what is {n} {a} in {b}",
        "what's {n} {a} in {b}",
        "express {n} {a} in {b}",
        "{n} {a} is how many {b}",
        "give me {n} {a} in {b}",
        "{n} {a} equals how many {b}",
        "how much is {n} {a} in {b}",
        "how many {b} in {n} {a}",
    ],
    ["how many {b} are there in {n} {a}", "change {n} {a} into {b}"],
)
WEEKDAY_PHRASES = (
    [
        "what day is it",
        "what day is it today",
        "what day of the week is it",
        "what day are we on",
        "today is what day",
        "what day of the week are we on",
        "what weekday is it",
        "what month is it",
        "what month are we in",
    ],
    ["which day is it today", "do you know what day it is"],
)
DATE_PHRASES = (
    [
        "what is the date",
        "what's today's date",
        "what is the date today",
        "what's the date today",
        "what's the date",
        "today's date please",
        "give me today's date",
        "what year is it",
        "what year are we in",
        "what's the year",
    ],
    ["what date is it", "do you know the date"],
)
TOMORROW_PHRASES = (
    [
        "what day is it tomorrow",
        "what is tomorrow's date",
        "what's the date tomorrow",
        "what day is tomorrow",
        "what day comes after today",
        "tomorrow is what day",
        "what's the day after today",
        "give me tomorrow's date",
    ],
    ["what will tomorrow be", "which day is tomorrow"],
)
ANOTHER_DAY_PHRASES = (
    [
        "what day was it yesterday",
        "what was yesterday's date",
        "what was the date yesterday",
        "what day was it {n} days ago",
        "what was the date {n} days ago",
        "what day of the week is {holiday}",
        "what's the date of {holiday}",
        "how many days are left before {holiday}",
        "when is {holiday}",
        "what day was it last week",
    ],
    ["which day was yesterday", "what date was it {n} days ago", "what day is {holiday} on"],
)
IN_DAYS_PHRASES = (
    [
        "what day will it be in {n} days",
        "what is the date in {n} days",
        "what's the date {n} days from now",
        "what day is it in {n} days",
        "what's the day {n} days from now",
        "{n} days from now what day is it",
        "what day is {n} days from today",
        "give me the date {n} days from now",
    ],
    ["which day will it be in {n} days", "what date will it be in {n} days"],
)
CALENDAR_PHRASES = {
    "weekday": WEEKDAY_PHRASES,
    "date": DATE_PHRASES,
    "tomorrow": TOMORROW_PHRASES,
    "in": IN_DAYS_PHRASES,
}
CHAT_PHRASES = {
    "greeting": (
        [
            "hello",
            "hi",
            "hey there",
            "good morning",
            "hi quicksilver",
            "hello there",
            "good evening",
            "hey",
            "hiya",
            "howdy",
            "hello quicksilver",
            "hi there",
            "greetings",
            "good day",
            "hey hey",
            "yo",
            "morning",
            "well hello",
            "hi buddy",
            "hey buddy",
            "how are you",
            "how's it going",
            "what's up",
            "nice to meet you",
        ],
        ["hey quicksilver", "good afternoon"],
    ),
    "thanks": (
        [
            "thank you",
            "thanks",
            "thanks a lot",
            "thank you very much",
            "cheers",
            "thanks quicksilver",
            "thanks for the help",
            "thank you for helping",
            "I appreciate it",
            "thanks a bunch",
            "much appreciated",
            "great thanks",
            "perfect thank you",
            "that helps thanks",
            "thank you kindly",
            "awesome thanks",
            "that was helpful",
        ],
        ["thanks so much", "many thanks"],
    ),
    "identity": (
        [
            "who are you",
            "what are you",
            "what is your name",
            "what's your name",
            "tell me about yourself",
            "who is this",
            "introduce yourself",
            "who made you",
            "what is quicksilver",
            "what do I call you",
            "what are you called",
            "who am I speaking with",
            "tell me your name",
            "who built you",
            "who created you",
            "are you a robot",
            "are you human",
            "what kind of assistant are you",
            "your name please",
            "do you have a name",
            "how do you work",
        ],
        ["who am I talking to", "what should I call you"],
    ),
    "abilities": (
        [
            "what can you do",
            "what can you help me with",
            "what do you know",
            "help",
            "what are your skills",
            "what can I ask you",
            "how can you help me",
            "what are you good at",
            "show me what you can do",
            "what are you capable of",
            "what are you here for",
            "tell me what you can do",
            "what else can you do",
            "what kind of stuff can you do",
            "what questions can you answer",
            "what are your abilities",
            "what do you do",
            "can you help me",
            "how do I use you",
            "what are your features",
            "list your skills",
        ],
        ["what are you able to do", "what things can you do"],
    ),
    "farewell": (
        [
            "goodbye",
            "bye",
            "see you later",
            "bye bye",
            "good night",
            "goodbye quicksilver",
            "bye for now",
            "catch you later",
            "have a good day",
            "that's all for now",
            "see ya",
            "I have to go",
            "talk soon",
            "that's it for today",
            "bye then",
            "goodbye for now",
            "I'm done",
            "gotta go",
            "take care",
        ],
        ["see you", "talk to you later"],
    ),
}
# Many unlike requests, so that "out of scope" means "none of the skills", not "one of a
# few memorised sentences"; some sit near a skill on purpose ("tell me about {x}" beside
# "tell me about yourself", dollars beside metres). A test keeps a word of every held-out
# phrasing out of all training phrasings.
OUT_OF_SCOPE = (
    [
        # facts about the world
        "what is the capital of {x}",
        "who is the president of {x}",
        "what's the population of {x}",
        "how far away is {x}",
        "tell me about {x}",
        "tell me a fun fact about {x}",
        "what language do they speak in {x}",
        "what currency does {x} use",
        "where is {x}",
        "how old is {x}",
        "how big is {x}",
        "what is {x} famous for",
        "what do people eat in {x}",
        "is {x} safe to visit",
        "who lives in {x}",
        "when was {x} founded",
        "who invented {x}",
        "who discovered {x}",
        "what does {x} mean",
        "define {x}",
        "is {x} healthy",
        "why do people like {x}",
        "how many people live in {x}",
        "why is the sky blue",
        "how does the internet work",
        "what is the speed of light",
        "how far is the sun",
        "who wrote romeo and juliet",
        "who painted the mona lisa",
        "what is the price of gold",
        "when is the next full moon",
        "who won the game last night",
        "what is the meaning of life",
        # weather and news
        "what's the weather like in {x}",
        "what is the temperature in {x}",
        "is it going to rain tomorrow",
        "will it snow in {x}",
        "what is the news in {x}",
        "read me the news",
        "what's on tv tonight",
        "what time is it in {x}",
        # things to do
        "play some music",
        "play the radio",
        "turn on the lights",
        "turn off the lights",
        "turn up the volume",
        "open the door",
        "set a timer for {n} minutes",
        "wake me up in {n} minutes",
        "book a flight to {x}",
        "find me a hotel in {x}",
        "how do I get to {x}",
        "where can I buy {x}",
        "order {x} for dinner",
        "add {x} to my shopping list",
        "send a message to {x}",
        "email {x}",
        "search the web for {x}",
        "look up {x}",
        "show me pictures of {x}",
        "translate {x} into french",
        "how do you say {x} in spanish",
        # making things up
        "tell me a joke about {x}",
        "tell me a story about {x}",
        "write a poem about {x}",
        "sing a song about {x}",
        "draw a picture of {x}",
        "describe {x}",
        "recommend a movie",
        "recommend a book about {x}",
        # advice and opinions
        "how do I cook {x}",
        "how do I make {x}",
        "how do I fix my car",
        "how do I lose weight",
        "give me some advice",
        "what is your favourite food",
        "do you like {x}",
        "can you cook {x}",
        "do you dream",
        # mathematics beyond the skills
        "what is the square root of {n}",
        "what is {n} squared",
        "what is {n} to the power of 3",
        "is {n} a prime number",
        "what is ten percent of {n}",
        "what is the sine of {n}",
        "what is the log of {n}",
        "what is pi",
        "convert {n} dollars to euros",
    ],
    [
        "what is the history of {x}",
        "what's the best restaurant in {x}",
        "what is the cube root of {n}",
        "remind me to call {x}",
        "how tall is the tallest building in {x}",
        "what is {n} factorial",
    ],
)
OUT_OF_SCOPE_FILLS = {
    False: [
        *("france", "japan", "brazil", "canada", "germany", "spain", "china", "india"),
        *("egypt", "mexico", "sweden", "paris", "london", "tokyo", "new york", "chicago"),
        *("madrid", "rome", "pasta", "rice", "soup", "noodles", "fish", "cats", "dogs"),
        *("birds", "lions", "the moon", "the sun", "jupiter", "the ocean", "football"),
        *("chess", "trees", "cars", "my mother", "my sister", "my dad", "my boss"),
    ],
    True: ["italy", "kenya", "berlin", "tacos", "horses", "mars", "peru", "sydney", "my brother"],
}


def phrasings() -> list[tuple[list[str], list[str]]]:
    """Every (training phrasings, held-out phrasings) pair of the corpus."""
    by_kind = [*CALENDAR_PHRASES.values(), *CHAT_PHRASES.values()]
    return [
        *(ADD_PHRASES, SUB_PHRASES, MUL_PHRASES, DIV_PHRASES, COUNT_PHRASES, LENGTH_PHRASES),
        *(SPELL_PHRASES, BACKWARDS_PHRASES, FIRST_PHRASES, LAST_PHRASES, BIGGER_PHRASES),
        *(SMALLER_PHRASES, IS_BIGGER_PHRASES, IS_SMALLER_PHRASES, ORDER_PHRASES),
        *(CONVERT_PHRASES, ANOTHER_DAY_PHRASES, OUT_OF_SCOPE),
        *by_kind,
    ]


def words_in(texts: Iterable[str]) -> set[str]:
    """The lower-case words of some phrasings or topics (placeholders count as words)."""
    return {word for text in texts for word in re.findall(r"[a-z]+", text.lower())}


def held_out_phrasing_words() -> set[str]:
    """The words of the held-out phrasings and topics, which no made-up or unknown word
    may be (training on spelling "see" would teach the held-out "see you")."""
    texts = [text for _, held_out in phrasings() for text in held_out]
    return words_in([*texts, *OUT_OF_SCOPE_FILLS[True]])


# --------------------------------------------------------------------------- words

WORDS = """
apple banana cherry orange grape lemon melon peach pear plum mango kiwi berry
strawberry table chair window door house garden kitchen bottle pencil paper letter
number picture river mountain forest desert island ocean valley castle bridge tower
street market school teacher student doctor farmer painter singer driver pilot baker
writer yellow purple silver golden green black white brown happy funny quiet simple
gentle clever bright little giant rabbit monkey tiger zebra camel horse turtle parrot
dolphin spider kitten puppy winter summer spring autumn morning evening rocket planet
comet galaxy robot engine wheel button candle basket blanket
pillow coffee butter cookie bread cheese pizza pepper sugar tomato potato carrot onion
music guitar piano violin trumpet drum balloon bubble puzzle
riddle jacket pocket mirror ladder hammer needle thread wallet ticket camera laptop
phone circle square triangle elephant giraffe penguin kangaroo squirrel butterfly
mosquito library hospital airport station museum theater village mississippi committee
balloon address success accommodate necessary
""".split()
WORDS = sorted(set(WORDS))  # words to spell: never whole tokens (see vocabulary)


def _word(rng: random.Random, held_out: bool) -> str:
    pool = [w for w in WORDS if is_held_out("word:" + w) == held_out]
    return rng.choice(pool)


# --------------------------------------------------------------------------- helpers


def _num(rng: random.Random, top: int) -> int:
    """Operands of every length: pick the number of digits first, then the number."""
    digits = rng.randint(1, len(str(top)))
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), min(top, 10**digits - 1))


UNORDERED = {"add", "mul", "cmp", "ord"}  # 9 × 7 is the same fact as 7 × 9


def _pair(
    rng: random.Random,
    held_out: bool,
    skill: str,
    draw: Callable[[], tuple],
    always_trained: Callable[[tuple], bool] = lambda value: False,
) -> tuple:
    """Draw operands until they fall on the asked side of the held-out split; values
    ``always_trained`` accepts are on the training side whatever their hash."""
    while True:
        value = draw()
        if (is_held_out_value(skill, value) and not always_trained(value)) == held_out:
            return value


def is_held_out_value(skill: str, value: tuple) -> bool:
    """Whether operands (numbers, a date offset) are held out for a skill's key ("mul":
    either order is the same fact)."""
    key = tuple(sorted(value, key=str)) if skill in UNORDERED else value
    return is_held_out(f"{skill}:{key}")


# Set while held-out items are drawn in training's phrasings (``held_out_set``).
_TRAINED_PHRASINGS: ContextVar[bool] = ContextVar("trained_phrasings", default=False)


def _phrase(rng: random.Random, held_out: bool, phrases: tuple[list[str], list[str]]) -> str:
    held_out_phrasing = held_out and not _TRAINED_PHRASINGS.get()
    return rng.choice(phrases[1] if held_out_phrasing else phrases[0])


def _as_number(text: str) -> int | str:
    return text if "." in text else int(text)


SKILLS: dict[str, tuple[Callable[[random.Random, bool], Item], float]] = {
    "addition": (addition, 1.5),
    "subtraction": (subtraction, 2.0),
    "multiplication": (multiplication, 3.0),
    "division": (division, 1.5),
    "letter count": (letter_count, 1.5),
    "spelling": (spelling, 1.0),
    "backwards": (backwards, 1.0),
    "first/last letter": (first_last, 0.5),
    "comparison": (comparison, 1.5),
    "ordering": (ordering, 1.0),
    "conversion": (conversion, 1.5),
    "calendar": (calendar_item, 2.0),
    "conversation": (conversation, 0.8),
    "out of scope": (refusal, 1.6),
}


def with_date(item: Item, rng: random.Random, held_out: bool) -> Item:
    """The assistant always passes today's date; half the items carry one, as in use."""
    if item.context or rng.random() < 0.5:
        return item
    return dataclasses.replace(item, context=date_context(_today(rng, held_out)))


MULTI_TURN_SHARE = 0.2  # items that follow one or two earlier exchanges, as in a conversation
HISTORY_CHARS = 150  # the longest history, so that it fits the model's context


def with_history(items: list[Item], rng: random.Random) -> list[Item]:
    """Give some items the exchanges before them in the list as their conversation so far.

    The model must answer the last question only, whatever was said before; without
    such items it answers worse as soon as the assistant's memory holds a turn.
    """
    out = []
    for i, item in enumerate(items):
        if i == 0 or rng.random() >= MULTI_TURN_SHARE:
            out.append(item)
            continue
        turns = 2 if i > 1 and rng.random() < 0.3 else 1
        history = tuple((before.question, before.answer) for before in items[i - turns : i])
        if _chars(history) > HISTORY_CHARS:
            history = history[-1:]
        if _chars(history) > HISTORY_CHARS:
            history = ()
        out.append(dataclasses.replace(item, history=history))
    return out


MADE_UP_WORD_SHARE = 0.6  # spelling and letter items whose word is made up
WORD_SKILLS = ("letter count", "spelling", "backwards", "first/last letter")
_ONSETS = "b c d f g h j k l m n p r s t v w y z bl br ch cl cr dr fl fr gl gr pl pr sc sh sk sl sn sp st str sw th tr tw wh".split()  # noqa: E501
_VOWELS = "a e i o u a e i o u ai ay ea ee ie oa oo ou ow".split()
_CODAS = [""] * 12 + "b ck d ff ft g k l ll m mp n nd ng nt p r rd rk rn rt s ss st t tt x".split()


@functools.cache
def made_up_words(count: int = 3000) -> tuple[str, ...]:
    """Pronounceable words that exist nowhere else in the corpus, for spelling practice.

    With only the ~140 real training words the model learns their spellings by heart and
    spells no held-out word; thousands of words it sees a few times each leave copying the
    letters from the operand slot as the only way. None is a real word to spell, an
    unknown word, a word the tokenizer keeps whole (so no training phrasing word) or a
    held-out phrasing word.
    """
    rng = random.Random("made-up words")
    taken = {w.strip().lower() for w in vocabulary()} | set(WORDS) | set(UNKNOWN_WORDS)
    taken |= held_out_phrasing_words()
    words: set[str] = set()
    while len(words) < count:
        syllables = rng.choice((1, 1, 1, 2, 2, 3))
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
        ) + rng.choice(("", "", "", "e", "y", "er", "le"))
        if 3 <= len(word) <= 11 and word not in taken and normalise_spoken(word) == word:
            words.add(word)
    return tuple(sorted(words))


def with_made_up_words(items: list[Item], rng: random.Random) -> list[Item]:
    """Ask some spelling and letter questions about a made-up word, phrased afresh."""
    out = []
    for item in items:
        if item.skill not in WORD_SKILLS or rng.random() >= MADE_UP_WORD_SHARE:
            out.append(item)
            continue
        maker = SKILLS[item.skill][0]
        made = maker(rng, False, word=rng.choice(made_up_words()))
        out.append(dataclasses.replace(made, context=item.context))
    return out


def _chars(history: tuple[tuple[str, str], ...]) -> int:
    return sum(len(question) + len(answer) for question, answer in history)


UNKNOWN_WORD_SHARE = 0.25  # questions that carry one or two words the model never learned
# Kept out of the vocabulary (so spelled out, like any word the tokenizer does not know),
# away from the words to spell and from every held-out phrasing (a test checks both).
UNKNOWN_WORDS = """
actually quickly really maybe just again exactly basically right well alright quick
question computer buddy friend listen kindly honestly literally seriously simply probably
perhaps wonder curious wondering mate dear yo oh hmm erm sure yeah kind excuse pardon
mister lady guys folks everyone somebody anyone machine silly super quite rather pretty
think need want would could might must shall gotta wanna gonna hurry already still also
too even only ever never always sometimes often usually anyway besides meanwhile
otherwise therefore however though although because since unless until whether while
lovely nice great awesome cool fine amazing wonderful brilliant
""".split()


def with_unknown_words(items: list[Item], rng: random.Random) -> list[Item]:
    """Put a word or two the model does not know somewhere in some questions.

    Transcripts carry words outside the model's vocabulary, and they reach it spelled out
    letter by letter, as the words it is asked to spell do. Without such items it takes
    any spelled-out word for one to spell, and a phrasing it has not seen throws it.
    Speech puts them anywhere ("spell uh kitten", "count the well r's in cherry"), so
    they go before, inside or after the question, never into a spoken number.
    """
    out = []
    for item in items:
        if rng.random() >= UNKNOWN_WORD_SHARE:
            out.append(item)
            continue
        words = " ".join(rng.sample(UNKNOWN_WORDS, rng.randint(1, 2)))
        insert = functools.partial(_insert_anywhere, words=words, rng=rng)
        out.append(dataclasses.replace(item, question=_edit_words(item.question, insert)))
    return out


def _insert_anywhere(tokens: list[str], words: str, rng: random.Random) -> list[str]:
    where = rng.choice(_insertion_points(tokens, words))
    return [*tokens[:where], words, *tokens[where:]]


def _edit_words(question: str, edit: Callable[[list[str]], list[str]]) -> str:
    """``question`` with its words (the closing "?" or "." kept aside) passed through
    ``edit``."""
    body = question.rstrip("?.")
    return " ".join(edit(body.split(" "))) + question[len(body) :]


def numbers_of(tokens: list[str]) -> list[str]:
    """The numbers a question's words give the model, spoken ones read as digits."""
    return numbers_in(normalise_spoken(" ".join(tokens)))


def _insertion_points(tokens: list[str], words: str) -> list[int]:
    """Word boundaries where ``words`` leave the question's numbers as they were: not
    inside "three hundred and five" or "nine point one one"."""
    before = numbers_of(tokens)
    inside = [
        i for i in range(1, len(tokens)) if numbers_of([*tokens[:i], words, *tokens[i:]]) == before
    ]
    return [0, len(tokens), *inside]


ARITHMETIC = ("addition", "subtraction", "multiplication", "division")
# Every word and sign that names the operation in a training arithmetic phrasing.
OPERATION_WORDS = frozenset(
    "plus + add sum total minus - take subtract times x multiply multiplied product "
    "divided divide /".split()
)
NO_OPERATION_SHARE = 0.15  # arithmetic questions whose operation becomes an unknown word


def with_unknown_operations(items: list[Item], rng: random.Random) -> list[Item]:
    """Turn some arithmetic questions into refusals by putting an unknown word where the
    operation was ("what is 22 plus 5" → "what is 22 maybe 5").

    Unknown words are read past everywhere else, so without these items an operation the
    model does not know ("what is 22 factorial") is read past too, and it makes up a sum.
    """
    out = []
    for item in items:
        if item.skill not in ARITHMETIC or rng.random() >= NO_OPERATION_SHARE:
            out.append(item)
            continue
        question = _edit_words(
            item.question,
            lambda tokens: [
                rng.choice(UNKNOWN_WORDS) if token.lower() in OPERATION_WORDS else token
                for token in tokens
            ],
        )
        out.append(Item("out of scope", question, "out of scope", REFUSAL, item.context))
    return out


# Per skill, the words that say what a question asks whatever its phrasing: a
# conversion's units, the day a calendar question is about. Its other whole words only
# frame the question, and a user may frame it with words the model never learned
# ("change 90 minutes into seconds", "what will tomorrow be").
KEYWORDS = {
    "conversion": frozenset(
        name + plural for unit in UNITS for name in unit[:2] for plural in ("", "s")
    ),
    # the day asked, before today ("was" too, the past tense) as well as after, and the
    # named days' words ("new year's day" gives "new" and "year", so "what year is it"
    # keeps "year" too): a swap must not make "what day was it yesterday" into "what day
    # was it literally", still declined, nor bring "christmas" into a question about today
    "calendar": frozenset(
        "today tomorrow yesterday date day days week weeks after ago last was".split()
        + [word for name in HOLIDAYS for word in name.replace("'s", "").split()]
    ),
}
UNKNOWN_FRAMING_SHARE = 0.3  # such questions whose framing word becomes an unknown word


def with_swapped_framing(
    items: list[Item],
    rng: random.Random,
    share: float = UNKNOWN_FRAMING_SHARE,
    words: Sequence[str] = UNKNOWN_WORDS,
) -> list[Item]:
    """Swap one framing word of a ``share`` of the conversion and calendar questions for
    one of ``words`` (unknown ones by default), the answer unchanged ("convert 90 minutes
    to seconds" → "maybe 90 minutes to seconds").

    Unknown words put beside the question (``with_unknown_words``) teach the model to read
    past them, not to answer a phrasing whose verb it never learned: there it saw only
    the phrasings' own words, so an unfamiliar frame around familiar keywords throws it.
    Keywords, numbers (spoken ones included) and the words a question spells out are kept.
    Known framing (``training_items``' ``known_framing``, the router's) swaps in known
    words that ask for no skill: a held-out phrasing is mostly words the model knows, in
    an order it never saw.
    """
    known = {word.strip().lower() for word in vocabulary()}
    out = []
    for item in items:
        keywords = KEYWORDS.get(item.skill)
        if keywords is None or rng.random() >= share:
            out.append(item)
            continue
        swap = functools.partial(
            _swap_framing_word, keep=keywords, known=known, rng=rng, words=words
        )
        out.append(dataclasses.replace(item, question=_edit_words(item.question, swap)))
    return out


@functools.cache
def neutral_words() -> tuple[str, ...]:
    """Vocabulary words that ask for no skill, for a framing word to become: no
    word of a skill's phrasings (held-out ones included, so that no swap makes one:
    "what day is it today" → the held-out "which day is it today"), of a day or a
    month, no keyword, operation or number. What is left are the topics of questions
    out of scope ("paris", "movie") and the like."""
    asked = [pair for pair in phrasings() if pair is not OUT_OF_SCOPE]
    barred = words_in(text for pair in asked for texts in pair for text in texts)
    barred |= held_out_phrasing_words() | OPERATION_WORDS
    barred |= set().union(*KEYWORDS.values())
    barred |= words_in([*DAYS, *MONTHS, *(month[:3] for month in MONTHS)])
    barred |= words_in(map(number_words, range(100)))
    words = {word.strip().lower() for word in vocabulary()}
    return tuple(sorted(w for w in words if w.isalpha() and w not in barred))


def _swap_framing_word(
    tokens: list[str],
    keep: frozenset[str],
    known: set[str],
    rng: random.Random,
    words: Sequence[str],
) -> list[str]:
    before = numbers_of(tokens)

    def framing(i: int) -> bool:
        word = tokens[i].lower()
        if word not in known or word.removesuffix("'s") in keep:
            return False
        return numbers_of([*tokens[:i], "maybe", *tokens[i + 1 :]]) == before

    candidates = [i for i in range(len(tokens)) if framing(i)]
    if not candidates:
        return tokens
    where = rng.choice(candidates)
    return [*tokens[:where], rng.choice(words), *tokens[where + 1 :]]


@functools.cache
def _held_out_patterns() -> tuple[re.Pattern[str], ...]:
    texts = [text for _, held_out in phrasings() for text in held_out]
    parts = (re.split(r"\{\w+\}", text.lower()) for text in texts)  # around the slots
    return tuple(re.compile(".+".join(map(re.escape, part))) for part in parts)


def is_held_out_phrasing(question: str) -> bool:
    """Whether a question, with or without the fillers a transcript adds, reads as one
    of the held-out phrasings. A slot takes any words, so the check errs on the safe
    side: "how many letter b's are there in wue", a training phrasing, reads as the
    held-out "how many {l}'s are there in {w}" (which it becomes without "letter")."""
    text = question.lower().rstrip("?.")
    opening, closing = "|".join(OPENING_FILLERS), "|".join(CLOSING_FILLERS)
    bare = re.sub(f" ({closing})$", "", re.sub(f"^({opening}) ", "", text))
    return any(p.fullmatch(form) for p in _held_out_patterns() for form in (text, bare))


def check_skill_names(names: Iterable[str]) -> None:
    """Refuse a skill the corpus does not have, naming the ones it has."""
    for name in names:
        if name not in SKILLS:
            raise ValueError(f"no skill named {name!r}; the skills are {list(SKILLS)}")


def training_items(
    count: int,
    seed: int = 0,
    skills: Collection[str] | None = None,
    augment: bool = True,
    weights: Mapping[str, float] | None = None,
    known_framing: float = 0.0,
) -> list[Item]:
    """``count`` training items, skills mixed by weight; the same seed gives the same list.

    ``weights`` overrides some skills' weights in ``SKILLS`` (a run that works on a few
    skills while it keeps practising the rest). ``augment`` gives some word items a
    made-up word, adds earlier exchanges to some items and unknown words to some
    questions (in place of the operation in some arithmetic ones, which then are
    refused), each drawn with its own generator, so the plain items (and the vocabulary
    counted from them) do not depend on it. ``known_framing``: the share of conversion
    and calendar questions one of whose framing words becomes a word of the vocabulary
    that asks nothing (:func:`neutral_words`), so that they are read by their units and
    days rather than their frames (augmented runs only).
    """
    names = list(skills or SKILLS)
    overrides = weights or {}
    check_skill_names(overrides)
    rng = random.Random(seed)
    makers = [SKILLS[name][0] for name in names]
    shares = [overrides.get(name, SKILLS[name][1]) for name in names]
    items = [
        with_date(rng.choices(makers, shares)[0](rng, False), rng, False) for _ in range(count)
    ]
    if not augment:
        return items
    items = with_made_up_words(items, random.Random(f"made-up words:{seed}"))
    items = with_unknown_operations(items, random.Random(f"unknown operations:{seed}"))
    items = with_unknown_words(items, random.Random(f"unknown words:{seed}"))
    items = with_swapped_framing(items, random.Random(f"unknown framing:{seed}"))
    if known_framing:
        rng = random.Random(f"known framing:{seed}")
        items = with_swapped_framing(items, rng, known_framing, neutral_words())
    return with_history(items, random.Random(f"history:{seed}"))


@functools.cache
def vocabulary(sample: int = 20_000, min_count: int = 20) -> tuple[str, ...]:
    """The words the tokenizer keeps whole: the corpus's recurring sentence words.

    Words the model must spell or count letters in stay single characters, and so
    do digits, so the model can copy them and reason over them. Cached (a tuple):
    every fresh reasoner-tiny engine builds its tokenizer from it.
    """
    counts: Counter[str] = Counter()
    for item in training_items(sample, seed=0, augment=False):
        user = normalise_spoken(item.question)
        for text in (user, item.thinking, item.answer, item.context):
            counts.update(re.findall(r" ?[A-Za-z]{2,}(?:'s)?| ?→", text))
    spelled = set(WORDS)
    return tuple(
        sorted(
            word
            for word, count in counts.items()
            if count >= min_count and word.strip().lower().removesuffix("'s") not in spelled
        )
    )


def held_out_set(
    per_skill: int = 50,
    seed: int = 1234,
    skills: Collection[str] | None = None,
    follow_up: bool = False,
    trained_phrasings: bool = False,
) -> dict[str, list[Item]]:
    """Evaluation items per skill: held-out numbers, words, dates and phrasings only.

    With ``follow_up`` the same items each come after one earlier exchange (another
    held-out question of any skill with its answer), as in a conversation. With
    ``trained_phrasings`` the held-out numbers, words, dates and topics are asked in the
    phrasings training uses: a skill that scores far higher so is held back by unfamiliar
    wording rather than by its reasoning.
    """
    rng = random.Random(seed)
    token = _TRAINED_PHRASINGS.set(trained_phrasings)
    try:
        sets = {
            skill: [with_date(maker(rng, True), rng, True) for _ in range(per_skill)]
            for skill, (maker, _) in SKILLS.items()
            if skills is None or skill in skills
        }
    finally:
        _TRAINED_PHRASINGS.reset(token)
    if not follow_up:
        return sets
    rng = random.Random(f"follow-up:{seed}")
    earlier = [
        (item.question, item.answer)
        for items in held_out_set(per_skill, seed + 1).values()
        for item in items
        if _chars(((item.question, item.answer),)) <= HISTORY_CHARS
    ]
    return {
        skill: [dataclasses.replace(item, history=(rng.choice(earlier),)) for item in items]
        for skill, items in sets.items()
    }
