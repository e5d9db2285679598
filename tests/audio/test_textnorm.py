"""Numbers, money, units and symbols become the words a person would say."""

from __future__ import annotations

import pytest
from quicksilver.audio.textnorm import int_to_words, normalize_text, ordinal_to_words


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("17 x 3 = 51", "seventeen times three equals fifty-one"),
        ("It costs $5.20.", "It costs five dollars and twenty cents."),
        ("$1 or €2,000", "one dollar or two thousand euros"),
        ("a $3.5M budget", "a three point five million dollars budget"),
        ("50% off", "fifty percent off"),
        (
            "It is 20°C, drive 80 km/h for 1 km.",
            "It is twenty degrees Celsius, drive eighty kilometers per hour for one kilometer.",
        ),
        ("a 5 ms delay at 16 kHz", "a five milliseconds delay at sixteen kilohertz"),
        ("the 1st and 22nd", "the first and twenty-second"),
        ("at 3:45 pm or 10:00", "at three forty-five P M or ten o'clock"),
        (
            "in 1999 and 2024, not 2005",
            "in nineteen ninety-nine and twenty twenty-four, not two thousand five",
        ),
        ("1,234.5", "one thousand two hundred thirty-four point five"),
        ("-7 and 3.14", "minus seven and three point one four"),
        ("1/2 cup & 3/4 spoon", "one half cup and three quarters spoon"),
        ("pages 5-10, 7 - 2", "pages five to ten, seven minus two"),
        ("**Bold** [docs](https://example.com)", "Bold docs"),
        ("see https://www.example.com/a?b", "see example dot com"),
        ("v 1.2.3", "v one dot two dot three"),
        # letters counted, not hours, liters or seconds; units written as units still are
        ("There is 1 H in kitchen.", "There is one H in kitchen."),
        ("Kitchen has 1 H.", "Kitchen has one H."),
        (
            "There are 2 L's in hello, 3 S’s in sass.",
            "There are two L's in hello, three S’s in sass.",
        ),
        ("5 h, 5h, 2 l and 2L", "five hours, five hours, two liters and two liters"),
        # dates as they are said
        ("Tuesday, August 12, 2031.", "Tuesday, August twelfth, twenty thirty-one."),
        ("on 3 March and June 1st", "on the third of March and June first"),
    ],
)
def test_normalize(text, spoken):
    assert normalize_text(text) == spoken


def test_number_words():
    assert int_to_words(0) == "zero"
    assert int_to_words(1_000_001) == "one million one"
    assert int_to_words(999_999_999_999).startswith("nine hundred ninety-nine billion")
    assert int_to_words(10**16) == "one " + "zero " * 15 + "zero"
    assert ordinal_to_words(12) == "twelfth" and ordinal_to_words(40) == "fortieth"
    assert ordinal_to_words(101) == "one hundred first"


def test_plain_text_is_unchanged():
    assert normalize_text("Hello there, how are you?") == "Hello there, how are you?"
