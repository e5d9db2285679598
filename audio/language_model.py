"""A word trigram model of the questions an assistant is asked, to choose what was heard.

Whisper's beam search ends with several hypotheses; on unclear speech the one it ranks
first is often not a question anyone would ask ("so tell me 0 plus i") while one below
it is ("so tell me 0 plus 9"). Rescoring the list with a language model of the domain
(shallow fusion over the n-best list, as speech recognisers have long done) picks the
likelier question without touching what Whisper heard clearly.

Words are counted in one canonical form: lower case, any number (digits or number
words) as ``<num>``, a counted letter ("r's") as ``<letter>``, so the model learns
"<num> plus <num>" once rather than every sum. Probabilities are interpolated
Witten-Bell estimates from trigrams down to a uniform floor, so an unseen word costs a
little rather than everything: a user may ask to spell any word.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from quicksilver.audio.textnorm import ONES, TENS

FORMAT = "quicksilver-question-lm"
FILE_NAME = "questions.lm.json"  # its name in a checkpoint folder, beside the weights
ORDER = 3
NUMBER, LETTER, START, END = "<num>", "<letter>", "<s>", "</s>"
_NUMBER_WORDS = frozenset(ONES + [w for w in TENS if w] + ["hundred", "thousand", "oh"])
_WORD = re.compile(r"[a-z0-9]+(?:['.][a-z0-9]+)*")
_LETTER = re.compile(r"[a-z]'s|[b-hj-z]")  # "r's", "t": a named letter ("a", "i" are words)


def words(text: str) -> list[str]:
    """``text`` in the model's canonical words (see the module docstring)."""
    out: list[str] = []
    for word in _WORD.findall(text.lower().replace("-", " ")):
        if word[0].isdigit() or word in _NUMBER_WORDS:
            word = NUMBER
        elif _LETTER.fullmatch(word):
            word = LETTER
        if not (word == NUMBER and out and out[-1] == NUMBER):  # "two hundred five": one
            out.append(word)
    return out


@dataclass
class QuestionModel:
    """n-gram counts (``"w1 w2 w3"`` → count, every order up to ``ORDER``) and what is
    derived from them at load: each context's total and its number of distinct words."""

    counts: dict[str, int]
    _totals: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _types: dict[str, int] = field(default_factory=dict, init=False, repr=False)
    _vocabulary: int = field(default=1, init=False, repr=False)

    def __post_init__(self) -> None:
        totals: Counter[str] = Counter()
        types: Counter[str] = Counter()
        vocabulary = 0
        for gram, count in self.counts.items():
            context = gram.rpartition(" ")[0]
            totals[context] += count
            types[context] += 1
            vocabulary += " " not in gram
        self._totals, self._types = dict(totals), dict(types)
        self._vocabulary = vocabulary + 1  # and one for every word never seen

    @classmethod
    def train(cls, sentences: Iterable[str], min_count: int = 2) -> QuestionModel:
        """Count ``sentences``; trigrams and bigrams seen fewer than ``min_count`` times
        are dropped (a smaller file that scores the same within noise)."""
        counts: Counter[str] = Counter()
        for sentence in sentences:
            padded = [START] * (ORDER - 1) + words(sentence) + [END]
            for i in range(ORDER - 1, len(padded)):
                for n in range(1, ORDER + 1):
                    counts[" ".join(padded[i - n + 1 : i + 1])] += 1
        return cls({g: c for g, c in counts.items() if c >= min_count or " " not in g})

    @classmethod
    def load(cls, path: str | Path) -> QuestionModel:
        """Read a model written by :meth:`save`; a clear error for any other file."""
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"cannot read the question model {path}: {error}") from error
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a question model (format {FORMAT!r})")
        return cls({str(g): int(c) for g, c in data["counts"].items()})

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        body = {"format": FORMAT, "version": 1, "order": ORDER, "counts": self.counts}
        path.write_text(json.dumps(body, separators=(",", ":"), sort_keys=True))
        return path

    @property
    def vocabulary(self) -> set[str]:
        return {gram for gram in self.counts if " " not in gram}

    def probability(self, context: tuple[str, ...], word: str) -> float:
        """P(word | the last ``ORDER - 1`` words): Witten-Bell, interpolated down to the
        uniform floor over the vocabulary and one unseen word."""
        p = 1.0 / self._vocabulary
        for n in range(ORDER):
            history = " ".join(context[len(context) - n :]) if n else ""
            total = self._totals.get(history, 0)
            if total == 0:
                continue
            types = self._types[history]
            gram = f"{history} {word}" if history else word
            p = (self.counts.get(gram, 0) + types * p) / (total + types)
        return p

    def score(self, text: str) -> float:
        """Mean log-probability per word of ``text`` as a whole question (its end
        included), so that long and short hypotheses compare fairly."""
        padded = [START] * (ORDER - 1) + words(text) + [END]
        logs = [
            math.log(self.probability(tuple(padded[i - ORDER + 1 : i]), padded[i]))
            for i in range(ORDER - 1, len(padded))
        ]
        return sum(logs) / len(logs)
