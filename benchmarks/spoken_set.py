"""The spoken evaluation set: the shipped model's held-out questions, said by several voices.

A transcript is judged by what the engine would be asked: both the question and the
transcript go through reasoner-tiny's spoken-question normalisation (the prompt
preparation the engine applies), and the question's content (every number, operator,
unit and asked word) must come through in order. A missed "the" or "please" changes
nothing the model is asked; "fifteen" heard as "fifty" does. Audio is made at run time
(espeak-ng and Piper are deterministic), so no recordings are kept in the repository.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from quicksilver.audio.resample import resample
from quicksilver.audio.textnorm import normalize_text
from quicksilver.audio.tts import Voice
from quicksilver.audio.vad import SAMPLE_RATE, VadConfig
from quicksilver.audio.wavfile import read_wav
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


@dataclass(frozen=True)
class Speaker:
    """One synthetic voice: an espeak-ng voice at a speaking rate, or Piper at a speed."""

    name: str
    engine: str  # "espeak" or "piper"
    voice: str  # espeak-ng voice name, or Piper voice name/path
    rate: float  # espeak: words per minute; Piper: speed factor (1.0 = the voice's own)

    def say(self, text: str, piper: Voice | None = None) -> np.ndarray:
        """16 kHz mono float32 speech of ``text``, silence trimmed."""
        if self.engine == "espeak":
            samples = _espeak(normalize_text(text), self.voice, int(self.rate))
        elif self.engine == "piper":
            if piper is None:
                raise ValueError(f"{self.name} needs a loaded Piper voice")
            samples = resample(piper.speak(text), piper.sample_rate, SAMPLE_RATE)
        else:
            raise ValueError(f"unknown speech engine {self.engine!r}: use espeak or piper")
        return _trim(samples)


# Six voices: four espeak-ng accents at 135-175 words a minute, the bundled Piper voice at
# its own pace and 20% faster (the only Piper voice a package installs offline).
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


def room_noise(size: int, seed: int = 0) -> np.ndarray:
    """Pink noise, the spectrum of a room's ventilation hum and distant traffic (1/f power),
    unit RMS; made from a seed so every run hears the same noise."""
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(size))
    frequencies = np.fft.rfftfreq(size, 1 / SAMPLE_RATE)
    spectrum[1:] /= np.sqrt(frequencies[1:])
    spectrum[0] = 0
    noise = np.fft.irfft(spectrum, size)
    return (noise / np.sqrt(np.mean(noise**2))).astype(np.float32)


def as_utterance(speech: np.ndarray) -> np.ndarray:
    """``speech`` as the VAD hands it to Whisper: its pre-roll of silence before, its tail
    after (a clip cut at the first and last sample is heard worse than a real one)."""
    config = VadConfig()
    before = np.zeros(config.pre_roll_ms * SAMPLE_RATE // 1000, np.float32)
    after = np.zeros(config.tail_ms * SAMPLE_RATE // 1000, np.float32)
    return np.concatenate([before, speech, after])


def with_noise(speech: np.ndarray, snr_db: float, seed: int = 0) -> np.ndarray:
    """``speech`` with room noise added at ``snr_db``: the power of its loud part (the
    speech, not the silence around it) over the noise's."""
    loud = speech[np.abs(speech) > 0.01]
    if loud.size == 0:
        raise ValueError("cannot add noise at a signal-to-noise ratio to silence")
    power = float(np.mean(loud.astype(np.float64) ** 2))
    noise = room_noise(speech.size, seed) * np.sqrt(power / 10 ** (snr_db / 10))
    return np.clip(speech + noise, -1, 1).astype(np.float32)


def _espeak(text: str, voice: str, wpm: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as folder:
        raw, wav = Path(folder) / "raw.wav", Path(folder) / "speech.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(wpm), "-w", str(raw), text],
                       check=True, timeout=60)  # fmt: skip
        # -D: no dither, so a voice says a question with the same samples in every run
        resample = ["sox", "-D", str(raw), "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16", str(wav)]
        subprocess.run(resample, check=True, timeout=60)
        return read_wav(wav)


def _trim(samples: np.ndarray, level: float = 0.01) -> np.ndarray:
    loud = np.nonzero(np.abs(samples) > level)[0]
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]
