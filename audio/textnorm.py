"""Text normalisation for speech: numbers, money, units and symbols as words.

Piper reads text through espeak-ng, which says "$5.20" as "dollar five point two zero"
and skips "°C" or "km/h". An assistant's answers are full of such tokens, so they are
rewritten as the words a person would say before synthesis.
"""

from __future__ import annotations

import re

# The number words, shared with reasoner-tiny's corpus and spoken-question normaliser.
ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
        "eighteen", "nineteen"]  # fmt: skip
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_WORDS = {"one": "first", "two": "second", "three": "third", "five": "fifth",
                  "eight": "eighth", "nine": "ninth", "twelve": "twelfth"}  # fmt: skip
_FRACTIONS = {(1, 2): "one half", (1, 3): "one third", (2, 3): "two thirds",
              (1, 4): "one quarter", (3, 4): "three quarters"}  # fmt: skip

# unit: (singular, plural); matched only right after a number
_UNITS = {
    "km/h": ("kilometer per hour", "kilometers per hour"), "kph": ("kilometer per hour",
    "kilometers per hour"), "mph": ("mile per hour", "miles per hour"),
    "m/s": ("meter per second", "meters per second"), "km": ("kilometer", "kilometers"),
    "cm": ("centimeter", "centimeters"), "mm": ("millimeter", "millimeters"),
    "m": ("meter", "meters"), "mi": ("mile", "miles"), "ft": ("foot", "feet"),
    "in": ("inch", "inches"), "kg": ("kilogram", "kilograms"), "mg": ("milligram", "milligrams"),
    "g": ("gram", "grams"), "lb": ("pound", "pounds"), "lbs": ("pound", "pounds"),
    "oz": ("ounce", "ounces"), "ml": ("milliliter", "milliliters"), "l": ("liter", "liters"),
    "ms": ("millisecond", "milliseconds"), "s": ("second", "seconds"),
    "sec": ("second", "seconds"), "min": ("minute", "minutes"), "h": ("hour", "hours"),
    "hr": ("hour", "hours"), "hrs": ("hour", "hours"), "kb": ("kilobyte", "kilobytes"),
    "mb": ("megabyte", "megabytes"), "gb": ("gigabyte", "gigabytes"),
    "tb": ("terabyte", "terabytes"), "hz": ("hertz", "hertz"), "khz": ("kilohertz", "kilohertz"),
    "mhz": ("megahertz", "megahertz"), "ghz": ("gigahertz", "gigahertz"),
    "w": ("watt", "watts"), "kw": ("kilowatt", "kilowatts"), "kwh": ("kilowatt hour",
    "kilowatt hours"), "v": ("volt", "volts"), "°c": ("degree Celsius", "degrees Celsius"),
    "°f": ("degree Fahrenheit", "degrees Fahrenheit"), "°": ("degree", "degrees"),
}  # fmt: skip
_CURRENCIES = {"$": ("dollar", "dollars", "cent", "cents"), "€": ("euro", "euros", "cent",
               "cents"), "£": ("pound", "pounds", "penny", "pence")}  # fmt: skip
_SYMBOLS = {"&": " and ", "+": " plus ", "=": " equals ", "@": " at ", "×": " times ",
            "÷": " divided by ", "±": " plus or minus ", "≈": " about ", "<": " less than ",
            ">": " greater than ", "%": " percent ", "~": " about ",
            "→": " to ", "…": "... ", "^": " to the power of "}  # fmt: skip

_NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
_UNIT_RE = re.compile(
    rf"(?<![\w.])(-?{_NUMBER})\s?("
    + "|".join(re.escape(u) for u in sorted(_UNITS, key=len, reverse=True))
    + r")(?![\w/'’])",  # "2 L's" counts letters
    re.IGNORECASE,
)
_CURRENCY_RE = re.compile(rf"([$€£])\s?({_NUMBER})(\s?(?:k|m|bn|million|billion|thousand)\b)?",
                          re.IGNORECASE)  # fmt: skip
_PERCENT_RE = re.compile(rf"(-?{_NUMBER})\s?%")
_ORDINAL_RE = re.compile(r"\b(\d+)(st|nd|rd|th)\b", re.IGNORECASE)
_MONTHS = ("January|February|March|April|May|June|July|August|September|October|November"
           "|December")  # fmt: skip
# "August 12, 2031" is said "August twelfth"; "12 August" is said "the twelfth of August"
_DAY_AFTER_MONTH_RE = re.compile(rf"\b({_MONTHS}) ([1-9]|[12]\d|3[01])\b(?![.:]\d)")
_DAY_BEFORE_MONTH_RE = re.compile(rf"(?<![\d.,])\b([1-9]|[12]\d|3[01]) ({_MONTHS})\b")
_TIME_RE = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b(\s?[ap]\.?m\.?)?", re.IGNORECASE)
_FRACTION_RE = re.compile(r"(?<![\d/])(\d{1,3})/(\d{1,3})(?![\d/])")
_ARITHMETIC_RE = re.compile(r"(?<=\d)(\s*)([x*/−-])(\s*)(?=-?\d)")
_NUMBER_RE = re.compile(rf"(?<![\w.])(-?){_NUMBER}(?![\w])")
_DOTTED_RE = re.compile(r"(?<![\w.])\d+(?:\.\d+){2,}(?!\w|\.\d)")  # versions, addresses
_MARKDOWN_LINK_RE = re.compile(r"\[([^\]]+)\]\([^)]+\)")
_URL_RE = re.compile(r"https?://(?:www\.)?([^/\s]+)\S*")
_MARKUP_RE = re.compile(r"[*_`#|]+|^\s*>", re.MULTILINE)


def _below_thousand(n: int) -> str:
    words = []
    if n >= 100:
        words.append(f"{ONES[n // 100]} hundred")
        n %= 100
    if n >= 20:
        words.append(TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else ""))
    elif n or not words:
        words.append(ONES[n])
    return " ".join(words)


def int_to_words(n: int) -> str:
    """Cardinal number in English words; beyond trillions, digit by digit."""
    if n < 0:
        return "minus " + int_to_words(-n)
    if n >= 10**15:
        return " ".join(ONES[int(d)] for d in str(n))
    words = []
    for value, name in _SCALES:
        if n >= value:
            words.append(f"{_below_thousand(n // value)} {name}")
            n %= value
    if n or not words:
        words.append(_below_thousand(n))
    return " ".join(words)


def ordinal_to_words(n: int) -> str:
    """1 → first, 22 → twenty-second."""
    words = int_to_words(n)
    head, sep, last = words.rpartition("-") if "-" in words.split()[-1] else words.rpartition(" ")
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return f"{head}{sep}{last}"


def number_to_words(text: str) -> str:
    """'1,234.56' → 'one thousand two hundred thirty-four point five six'; years as said."""
    negative = text.startswith("-")
    grouped = "," in text
    text = text.lstrip("-").replace(",", "")
    whole, _, decimals = text.partition(".")
    value = int(whole)
    if (
        not (negative or decimals or grouped)
        and len(whole) == 4
        and (1100 <= value <= 1999 or 2010 <= value <= 2099)
    ):  # a year: nineteen ninety-nine, twenty twenty-four
        century, rest = divmod(value, 100)
        tail = f"oh {ONES[rest]}" if 0 < rest < 10 else ("hundred" if rest == 0 else
                                                          _below_thousand(rest))  # fmt: skip
        words = f"{_below_thousand(century)} {tail}"
    else:
        words = int_to_words(value)
    if decimals:
        words += " point " + " ".join(ONES[int(d)] for d in decimals)
    return ("minus " if negative else "") + words


def _plural(number: str) -> bool:
    return number.lstrip("-") not in ("1", "1.0")


def _unit(match: re.Match[str]) -> str:
    number, unit = match.group(1), match.group(2).lower()
    if unit == "m" and match.group(2) == "M":
        return match.group(0)  # "5M" is more likely millions than meters; leave it
    if len(unit) == 1 and match.group(2).isupper() and match.group(0)[len(number)].isspace():
        return match.group(0)  # "Kitchen has 1 H.": a letter counted, not an hour
    singular, plural = _UNITS[unit]
    return f"{number_to_words(number)} {plural if _plural(number) else singular}"


def _currency(match: re.Match[str]) -> str:
    one, many, cent, cents = _CURRENCIES[match.group(1)]
    amount = match.group(2).replace(",", "")
    scale = (match.group(3) or "").strip().lower()
    if scale:
        scale_word = {"k": "thousand", "m": "million", "bn": "billion"}.get(scale, scale)
        return f"{number_to_words(amount)} {scale_word} {many}"
    whole, _, fraction = amount.partition(".")
    words = f"{int_to_words(int(whole))} {one if int(whole) == 1 else many}"
    if fraction:
        hundredths = int((fraction + "0")[:2])
        if hundredths:
            words += f" and {int_to_words(hundredths)} {cent if hundredths == 1 else cents}"
    return words


def _time(match: re.Match[str]) -> str:
    hour, minute = int(match.group(1)), int(match.group(2))
    suffix = (match.group(3) or "").replace(".", "").strip().lower()
    if minute == 0:
        words = f"{int_to_words(hour)} o'clock" if not suffix else int_to_words(hour)
    elif minute < 10:
        words = f"{int_to_words(hour)} oh {ONES[minute]}"
    else:
        words = f"{int_to_words(hour)} {_below_thousand(minute)}"
    return words + (f" {' '.join(suffix.upper())}" if suffix else "")


def _fraction(match: re.Match[str]) -> str:
    top, bottom = int(match.group(1)), int(match.group(2))
    if bottom == 0:
        return f"{int_to_words(top)} slash zero"
    if (top, bottom) in _FRACTIONS:
        return _FRACTIONS[(top, bottom)]
    return f"{int_to_words(top)} over {int_to_words(bottom)}"


def _operator(match: re.Match[str]) -> str:
    operator, spaced = match.group(2), bool(match.group(1) or match.group(3))
    if operator == "-" and not spaced:
        return " to "  # 5-10: a range
    return {"x": " times ", "*": " times ", "/": " divided by "}.get(operator, " minus ")


def normalize_text(text: str) -> str:
    """Rewrite ``text`` so that a TTS voice says what a person would read aloud."""
    text = _MARKDOWN_LINK_RE.sub(r"\1", text)
    text = _URL_RE.sub(lambda m: m.group(1).replace(".", " dot "), text)
    text = _MARKUP_RE.sub(" ", text)
    text = _DOTTED_RE.sub(lambda m: " dot ".join(number_to_words(p) for p in m[0].split(".")), text)
    text = _CURRENCY_RE.sub(_currency, text)
    text = _PERCENT_RE.sub(lambda m: f"{number_to_words(m.group(1))} percent", text)
    text = _UNIT_RE.sub(_unit, text)
    text = _TIME_RE.sub(_time, text)
    text = _ORDINAL_RE.sub(lambda m: ordinal_to_words(int(m.group(1))), text)
    text = _DAY_AFTER_MONTH_RE.sub(lambda m: f"{m[1]} {ordinal_to_words(int(m[2]))}", text)
    text = _DAY_BEFORE_MONTH_RE.sub(lambda m: f"the {ordinal_to_words(int(m[1]))} of {m[2]}", text)
    text = _FRACTION_RE.sub(_fraction, text)
    text = _ARITHMETIC_RE.sub(_operator, text)
    text = _NUMBER_RE.sub(lambda m: number_to_words(m.group(0)), text)
    for symbol, words in _SYMBOLS.items():
        text = text.replace(symbol, words)
    return re.sub(r"\s+", " ", text).strip()


# One spoken number that Whisper wrote as pieces: "two hundred and five" as "200 and 5",
# "five hundred and ninety-seven" as "590 7", "forty-two" as "40 2". Only a round number
# followed by what fills its zeros is joined; commas (lists: "18, 68 and 31") stop it.
_HUNDREDS_AND_RE = re.compile(r"(?<![\d.,])([1-9]00)(?: and)? ([1-9]\d?)(?![\d.,]\d|\d)")
_TENS_UNITS_RE = re.compile(r"(?<![\d.,])(\d*[1-9]0) ([1-9])(?![\d.,]\d|\d)")
# "one" as a pronoun, which Whisper asked for digits writes as "1" ("which 1 is bigger, 91
# or 76?"): read as a number it adds one to the question. Only after words that make it a
# pronoun whatever follows ("the 1" may be a number: "the 1 or the 5").
_PRONOUN_ONE_RE = re.compile(r"\b(which|each|any|every|this|that) 1\b(?![\d.,]\d)", re.IGNORECASE)


def spoken_numbers_to_digits(text: str) -> str:
    """Join the pieces of one spoken number in a transcript: "200 and 5" → "205",
    "590 7" → "597", "40 2" → "42"; write the pronoun "one" back as a word ("which 1 is"
    → "which one is"); everything else is left as it is."""
    text = _PRONOUN_ONE_RE.sub(r"\1 one", text)
    text = _HUNDREDS_AND_RE.sub(lambda m: str(int(m[1]) + int(m[2])), text)
    return _TENS_UNITS_RE.sub(lambda m: str(int(m[1]) + int(m[2])), text)
