"""Operand slots: a question's numbers and spelled-out words at fixed prompt positions.

A small diffusion model copies digits and letters from the question into its reasoning
far more easily when they sit at a fixed distance from the reply canvas than when they
float wherever the phrasing puts them ("add 2 to 94", "what do you get if you take 17
from 255"). Reasoner-tiny's prompt preparation (``prompt.py``) appends, to the question
it answers, a block of fixed-width fields::

    what is 17 plus 255 | 017 255 ___ ___ | ____________ ____________

Numbers are right-aligned and zero-padded, so the ones digit of every number is always
at the same place (with two decimal places for every number once the question has a
decimal: ``009.11 009.90``); words the tokenizer spells out letter by letter (the ones a
model may be asked to spell or count in) are left-aligned. Values too wide for a field
keep all their characters; fields beyond the count are dropped. A word that only names
the operand after it ("spell the word forest") takes no field. Training data goes
through the same function, so both sides agree.

With ``letter=True`` the block also holds the letter a question asks about, in a
one-character field between the numbers and the words (``| ___ ___ ___ ___ | r |
strawberry__ ____________``), and "letter" only names the operand after it: "count the
letter x in library" and "how many x's are in library" then end alike, whatever their
phrasing, and the letter a count starts from sits where attention always finds it.

With ``frames=True`` the letter skills' own frame words ("how *long* is kitten", "which
letter does kitten *begin* with", "tell me how many letters kitten *has*") take no word
field while a word that is not one can (a word asked about may be one: "spell number"),
so the asked word holds the first field whatever the frame; without it, "kitten has how
many letters" filled both fields with "has" and "letters", and the word was not in the
block at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable

NUMBER_FIELDS, INTEGER_WIDTH, DECIMAL_WIDTH = 4, 3, 2
WORD_FIELDS, WORD_WIDTH = 2, 12
EMPTY = "_"
# Words that name the operand that follows them rather than being one: "how many r's
# in the word strawberry" asks about "strawberry", never about "word".
LABEL_WORDS = frozenset({"word", "words"})
LETTER_LABEL_WORDS = LABEL_WORDS | {"letter", "letters"}
# The words of the letter skills' training phrasings that a tokenizer spells out (a test
# keeps the list equal to them): never a held-out phrasing's own word.
FRAME_WORDS = frozenset(
    {"begin", "comes", "ends", "final", "give", "has", "hear", "length", "let", "long"}
    | {"make", "number", "occur", "opening", "read", "reverse", "spelling", "starts", "up"}
)
# The asked letter: "r's" ("rs" as Whisper may write it, but not "as", "is", "us"), or
# the letter after "letter"; failing both, a lone letter that is not the word "a" or "i".
ASKED_LETTER = (
    re.compile(r"\b([a-z])'s\b"),
    re.compile(r"\b([b-hj-tv-z])s\b"),
    re.compile(r"\bletters? ([a-z])\b"),
    re.compile(r"\b([b-hj-z])\b"),
)


def operand_slots(
    question: str,
    spelled: Callable[[str], bool],
    last_words: bool = False,
    letter: bool = False,
    frames: bool = False,
) -> str:
    """The slot block for a normalised question; ``spelled(word)``: is it spelled out;
    ``letter``: the block has a field for the letter asked about; ``frames``: frame words
    give way to the asked word (see the module's text).

    ``last_words``: the word fields take the question's last spelled-out words rather than
    its first. The word asked about comes at the end of nearly every phrasing ("give me
    the number of u's in penguin"), while unfamiliar phrasing words, spelled out as well,
    come before it: taking the first two pushed the asked word out of the fields in a
    quarter of the training questions about letters (none of the held-out ones).
    """
    numbers = numbers_in(question)[:NUMBER_FIELDS]
    decimals = any("." in n for n in numbers)
    number_fields = [padded(n, decimals) for n in numbers]
    empty_number = EMPTY * INTEGER_WIDTH + ("." + EMPTY * DECIMAL_WIDTH if decimals else "")
    number_fields += [empty_number] * (NUMBER_FIELDS - len(number_fields))
    words = [w for w in re.findall(r"\b[a-z]{2,}\b", question) if spelled(w)]
    labels = LETTER_LABEL_WORDS if letter else LABEL_WORDS
    words = [w for i, w in enumerate(words) if w not in labels or i == len(words) - 1]
    if frames:
        words = [w for w in words if w not in FRAME_WORDS | labels] or words
    words = words[-WORD_FIELDS:] if last_words else words[:WORD_FIELDS]
    word_fields = [w.ljust(WORD_WIDTH, EMPTY) for w in words]
    word_fields += [EMPTY * WORD_WIDTH] * (WORD_FIELDS - len(word_fields))
    letter_field = f" {asked_letter(question) or EMPTY} |" if letter else ""
    return f"| {' '.join(number_fields)} |{letter_field} {' '.join(word_fields)}"


def asked_letter(question: str) -> str | None:
    """The letter a normalised question asks about ("how many r's in strawberry": r),
    or None."""
    for pattern in ASKED_LETTER:
        found = pattern.search(question)
        if found:
            return found.group(1)
    return None


def without_letter_label(question: str) -> str:
    """``question`` without "letter" before the letter it names ("count the letter r in
    spider" → "count the r in spider"), so that a count never shares the spelled-out
    letters of "letter" with "how many letters" and a word's length."""
    return re.sub(r"\bletter (?=[a-z](?:'?s)?\b)", "", question)


def numbers_in(question: str) -> list[str]:
    """The numbers of a normalised question, in order, as the slots take them."""
    return re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", question)


def padded(number: str | int, decimals: bool = False) -> str:
    """A number as its slot shows it; reasoning formats use it to start from the slots."""
    whole, _, fraction = str(number).partition(".")
    field = whole.zfill(INTEGER_WIDTH)
    return field + "." + fraction.ljust(DECIMAL_WIDTH, "0") if decimals else field
