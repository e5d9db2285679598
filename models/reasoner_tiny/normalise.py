"""Spoken-question normalisation: what a speech transcript says, in one canonical form.

Speech-to-text writes the same question many ways: "What's seventeen times three?",
"what is 17 x 3", "um, 17 times three". A small model learns far more from one form,
so reasoner-tiny's prompt preparation (``prompt.py``) gives it user text lower-cased,
without fillers or stray punctuation, with number words as digits ("three hundred and
five" → 305, "nine point one one" → 9.11, "21st" → 21, "an hour" → 1 hour), arithmetic
symbols as words ("eight x 4" → 8 times 4), units by name ("5 km" → 5 kilometers,
"metres" → meters), and without a label that only names the operand after it ("spell the
word kitten" → "spell kitten"). Training data goes through the same function, so both
sides agree.
"""

from __future__ import annotations

import re

from quicksilver.audio import textnorm

UNITS = {word: n for n, word in enumerate(textnorm.ONES)} | {"oh": 0}  # "nine point oh five"
TENS = {word: 10 * n for n, word in enumerate(textnorm.TENS) if word}
SCALES = {"hundred": 100, "thousand": 1000}
# Units a conversion is asked in: "an hour" and "a kilometer" are 1 of them, as "one hour"
# is. Not "second": "wait a second" asks for no conversion, and no unit is smaller.
ONE_OF = {
    "hour", "minute", "day", "week", "kilometer", "meter", "centimeter", "millimeter",
    "kilogram", "gram",
}  # fmt: skip
# "which one is bigger" asks for no number 1: after these words "one" stands for a thing
PRONOUN_ONE_AFTER = {
    "which", "this", "that", "the", "each", "every", "any", "another", "no", "either",
    "neither", "other", "same", "right", "wrong", "big", "small", "last", "first", "next",
}  # fmt: skip
_NUMBER = re.compile(r"\d+(\.\d+)?")
FILLERS = {"um", "umm", "uh", "uhh", "uhm", "er", "erm", "hmm", "mm", "ah"}
# Units as they are written ("5 km", "3 hrs"): Whisper abbreviates some, and users type
# them. A one-letter one is read as a unit only after a number ("5 m", not "the letter m").
UNIT_ABBREVIATIONS = {
    "km": "kilometer", "m": "meter", "cm": "centimeter", "mm": "millimeter",
    "kg": "kilogram", "g": "gram", "hr": "hour", "hrs": "hour", "min": "minute",
    "mins": "minute", "sec": "second", "secs": "second", "wk": "week", "wks": "week",
}  # fmt: skip
BRITISH_UNITS = {
    "kilometre": "kilometer", "metre": "meter", "centimetre": "centimeter",
    "millimetre": "millimeter", "kilogramme": "kilogram", "gramme": "gram",
}  # fmt: skip
_UNIT_BEFORE = {"to", "into", "in", "many"}  # "5 kilometers to cm", "how many mm"
CONTRACTIONS = {"what's": "what is", "how's": "how is", "it's": "it is", "that's": "that is"}
# A noun that only names the operand after it: "spell the word kitten" asks to spell
# "kitten", as "spell kitten" does. Kept when what follows is no operand ("the word for
# dog", "what does the word mean").
LABELS = {"word"}
NOT_AN_OPERAND = {
    "for", "of", "that", "which", "is", "are", "was", "means", "mean", "in", "on", "to",
    "and", "or", "with", "from", "by", "about", "it", "you", "i", "me", "a", "an", "the",
}  # fmt: skip
SYMBOLS = {
    "+": " plus ",
    "×": " times ",
    "*": " times ",
    "÷": " divided by ",
    "/": " divided by ",
    "=": " equals ",
}


def normalise_spoken(text: str) -> str:
    """The canonical form of a spoken or typed question (see the module docstring)."""
    text = text.lower().replace("’", "'")
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # 1,200 → 1200
    text = re.sub(r"(?<=\d)(st|nd|rd|th)\b", "", text)  # 21st → 21
    text = re.sub(rf"(?<=\d)(?=(?:{'|'.join(UNIT_ABBREVIATIONS)})\b)", " ", text)  # 5km
    text = re.sub(r"(?<=\d)\s*x\s*(?=\d)", " times ", text)  # 17x3, 17 x 3
    text = re.sub(r"(?<=\d)\s*-\s*(?=\d)|\s-\s", " minus ", text)  # 9-3, a - b (not twenty-one)
    for symbol, words in SYMBOLS.items():
        text = text.replace(symbol, words)
    text = re.sub(r"(?<!\d)\.|\.(?!\d)|[^\w\s.'-]", " ", text)  # punctuation, except 9.11
    text = re.sub(r"(?<=[a-z])-(?=[a-z])", " ", text)  # twenty-one → twenty one
    words = " ".join(CONTRACTIONS.get(w, w) for w in text.split()).split()
    words = [w.strip("'-") for w in _units_spelled_out(words) if w.strip("'-") not in FILLERS]
    words = _lists_with_and(_numbers_to_digits(words))
    return " ".join(_without_labels(_times_between_numbers(words)))


def _lists_with_and(words: list[str]) -> list[str]:
    """A run of three or more numbers, with no "and" after it, gets one before its last:
    Whisper writes a spoken list either way ("order 5, 2, 8, 1"), the corpus always with
    it ("order 5, 2, 8 and 1", a word perhaps between the run and its "and")."""
    out: list[str] = []
    run = 0
    for i, word in enumerate(words):
        is_number = _NUMBER.fullmatch(word) is not None
        run = run + 1 if is_number else 0
        following = words[i + 1] if i + 1 < len(words) else ""
        ends_run = is_number and not _NUMBER.fullmatch(following)
        if ends_run and run >= 3 and "and" not in words[i + 1 :]:
            out.append("and")
        out.append(word)
    return out


def _units_spelled_out(words: list[str]) -> list[str]:
    """Unit abbreviations and British spellings as the unit's name, plural but after one
    ("1 km" → "1 kilometer", "3 hrs" → "3 hours", "5 metres" → "5 meters"), where they
    follow a number or ask for a unit: "spell metre" still asks about "metre"."""
    out: list[str] = []
    for word in words:
        before = out[-1] if out else ""
        after_number = _NUMBER.fullmatch(before) or before in UNITS or before in TENS or (
            before in SCALES or before in ("a", "an"))  # fmt: skip
        name = UNIT_ABBREVIATIONS.get(word) or BRITISH_UNITS.get(word.removesuffix("s"))
        if name and (after_number or (len(word) > 1 and before in _UNIT_BEFORE)):
            word = name + ("" if before in ("1", "one", "a", "an") else "s")
        out.append(word)
    return out


def _times_between_numbers(words: list[str]) -> list[str]:
    """An "x" between two numbers as "times", once number words are digits: "eight x 4"
    is "8 x 4" only after the words are counted."""
    return [
        "times" if word == "x" and 0 < i < len(words) - 1
        and _NUMBER.fullmatch(words[i - 1]) and _NUMBER.fullmatch(words[i + 1]) else word
        for i, word in enumerate(words)
    ]  # fmt: skip


def _without_labels(words: list[str]) -> list[str]:
    """``words`` without a label before its operand, and the article before the label
    ("how many r's are in the word cherry" → "how many r's are in cherry")."""
    out: list[str] = []
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word in LABELS and following and following not in NOT_AN_OPERAND:
            if out and out[-1] in ("the", "a"):
                out.pop()
            continue
        out.append(word)
    return out


def _numbers_to_digits(words: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(words):
        value, used = _read_number(words, i)
        if used == 0:
            out.append(words[i])
            i += 1
            continue
        i += used
        if i + 1 < len(words) and words[i] == "point" and _digit_word(words[i + 1]) is not None:
            decimals = []
            i += 1
            while i < len(words) and _digit_word(words[i]) is not None:
                decimals.append(str(_digit_word(words[i])))
                i += 1
            out.append(f"{value}.{''.join(decimals)}")
        else:
            out.append(str(value))
    return out


def _digit_word(word: str) -> int | None:
    if word.isdigit() and len(word) == 1:
        return int(word)
    value = UNITS.get(word)
    return value if value is not None and value < 10 else None


def _is_pronoun(words: list[str], start: int) -> bool:
    """Whether the "one" at ``start`` stands for a thing ("which one", "the other one")
    rather than the number, as it does before "hundred" or "point" ("the one hundred")."""
    after = words[start + 1] if start + 1 < len(words) else ""
    if after in SCALES or after in TENS or after in UNITS or after == "point":
        return False
    return start > 0 and words[start - 1] in PRONOUN_ONE_AFTER


def _read_number(words: list[str], start: int) -> tuple[int, int]:
    """(value, words used) of a spelled or digit number at ``start``; (0, 0) if none."""
    first = words[start]
    if first == "point" and start + 1 < len(words) and _digit_word(words[start + 1]) is not None:
        return 0, 0  # handled by the caller only after an integer; "point five" stays words
    if _NUMBER.fullmatch(first):
        return 0, 0  # already digits
    if first in ("a", "an") and start + 1 < len(words) and words[start + 1] in ONE_OF:
        return 1, 1  # "an hour"
    if first == "oh" or (first not in UNITS and first not in TENS and first != "a"):
        return 0, 0
    if first == "a" and not (start + 1 < len(words) and words[start + 1] in SCALES):
        return 0, 0
    if first == "one" and _is_pronoun(words, start):
        return 0, 0
    total, current, i = 0, 0, start
    while i < len(words):
        word = words[i]
        if word == "a" and i == start:
            current = 1
        elif word in UNITS and word != "oh":
            if current % 10 or (current % 100 and (current % 100 < 20 or UNITS[word] >= 10)):
                break  # "three four", "eighty eighteen": two numbers
            current += UNITS[word]
        elif word in TENS:
            if current % 100:
                break
            current += TENS[word]
        elif word in SCALES and current:
            current *= SCALES[word]
            if word == "thousand":
                total, current = total + current, 0
        elif (
            word == "and"
            and i > start
            and i + 1 < len(words)
            and (words[i + 1] in UNITS or words[i + 1] in TENS)
            and (current >= 100 or total)
        ):
            pass  # "three hundred and five"
        else:
            break
        i += 1
    return total + current, i - start
