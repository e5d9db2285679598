"""The spoken evaluation set: the shipped model's held-out questions, said by several voices.

A transcript is judged by what the engine would be asked: both the question and the
transcript go through reasoner-tiny's spoken-question normalisation (the prompt
preparation the engine applies), and the question's content (every number, operator,
unit and asked word) must come through in order. A missed "the" or "please" changes
nothing the model is asked; "fifteen" heard as "fifty" does. Audio is made at run time
(``audio.synthetic_speech``), so no recordings are kept in the repository.
"""

from __future__ import annotations

import re

from quicksilver.audio.synthetic_speech import Speaker
from quicksilver.models.reasoner_tiny.corpus import held_out_set
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken

# Words that only frame a question: losing one leaves the question the model is asked
# intact. Everything else (numbers, operators, units, the word to spell, "backwards",
# "first", "tomorrow", the letter to count) is content.
FRAME_WORDS = frozenset(
    "a an the is are am be will it there what which how many much do does did i you me for "
    "in of to into on with and or than these this that so please hey okay ok um uh tell "
    "calculate give put change can could word letter number numbers let hear say one my".split()
)
_LETTER_PLURAL = re.compile(r"\b([a-z])(?:'s|s)\b", re.IGNORECASE)
_AFTER_LETTER = frozenset({"many", "the", "letter", "of"})


def canonical_words(text: str) -> list[str]:
    """Words as the engine sees them (numbers as digits), with a counted letter's plural
    ("f's", "Fs") read as the letter, the way the question asks for it."""
    words = normalise_spoken(text).split()
    out = []
    for i, word in enumerate(words):
        letter = _LETTER_PLURAL.fullmatch(word)
        if letter and ("'" in word or (i and words[i - 1] in _AFTER_LETTER)):
            word = letter.group(1)
        out.append(word)
    return out


def content_words(question: str) -> list[str]:
    """The words of ``question`` a transcript must keep, in order."""
    return [w for w in canonical_words(question) if w not in FRAME_WORDS]


def missing_content(question: str, transcript: str) -> list[str]:
    """Content words of ``question`` not found, in order, in ``transcript`` ([] if intact)."""
    heard, position, missing = canonical_words(transcript), 0, []
    for word in content_words(question):
        try:
            position = heard.index(word, position) + 1
        except ValueError:
            missing.append(word)
    return missing


def content_intact(question: str, transcript: str) -> bool:
    """Whether every number, operator, unit and asked word came through, in order."""
    return not missing_content(question, transcript)


# Six voices: four espeak-ng accents at 135-175 words a minute, the bundled Piper voice at
# its own pace and 20% faster (the only Piper voice a package installs offline). Training
# speech for Whisper (models/whisper_quicksilver) never uses these voice settings.
SPEAKERS = (
    Speaker("espeak en-us 135", "espeak", "en-us", 135),
    Speaker("espeak en-us+f3 160", "espeak", "en-us+f3", 160),
    Speaker("espeak en-gb-x-rp 150", "espeak", "en-gb-x-rp", 150),
    Speaker("espeak en-us-nyc 175", "espeak", "en-us-nyc", 175),
    Speaker("piper joe 1.0", "piper", "en_US-joe-medium", 1.0),
    Speaker("piper joe 1.2", "piper", "en_US-joe-medium", 1.2),
)


def questions(per_skill: int = 3, seed: int = 1234) -> list[str]:
    """Held-out questions of every skill of the shipped model, as ``quicksilver eval`` draws
    them (same seed), ``per_skill`` of each."""
    return [item.question for items in held_out_set(per_skill, seed).values() for item in items]
