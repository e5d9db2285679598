"""Synthetic speakers and room noise: speech made on this machine, for tests, benchmarks
and training.

A :class:`Speaker` is an espeak-ng voice at a speaking rate or a Piper voice at a speed;
it says a text as 16 kHz mono float32 audio with the silence around it trimmed.
:func:`as_utterance` gives a clip the silence the VAD keeps around an utterance, and
:func:`with_noise` mixes in room noise at a signal-to-noise ratio. espeak-ng is
deterministic, so the same text gives the same samples in every run.
"""

from __future__ import annotations

import functools
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


@dataclass(frozen=True)
class Speaker:
    """One synthetic voice: an espeak-ng voice at a speaking rate, or Piper at a speed."""

    name: str
    engine: str  # "espeak" or "piper"
    voice: str  # espeak-ng voice name (with a variant: "en-us+f3"), or Piper voice name/path
    rate: float  # espeak: words per minute; Piper: speed factor (1.0 = the voice's own)
    pitch: int = 50  # espeak only: 0-99

    def say(self, text: str) -> np.ndarray:
        """16 kHz mono float32 speech of ``text``, silence trimmed."""
        if self.engine == "espeak":
            samples = espeak(normalize_text(text), self.voice, int(self.rate), self.pitch)
        elif self.engine == "piper":
            voice = piper_voice(self.voice, self.rate)
            samples = resample(voice.speak(text), voice.sample_rate, SAMPLE_RATE)
        else:
            raise ValueError(f"unknown speech engine {self.engine!r}: use espeak or piper")
        return trim(samples)


@functools.lru_cache(maxsize=8)
def piper_voice(voice: str, rate: float) -> Voice:
    """A loaded Piper voice at ``rate``, shared by the speakers that use it (one thread: a
    speaker makes test audio beside the models under test)."""
    return Voice(voice, rate=rate, threads=1)


def espeak(text: str, voice: str, wpm: int, pitch: int = 50) -> np.ndarray:
    """``text`` said by espeak-ng, as 16 kHz mono float32."""
    with tempfile.TemporaryDirectory() as folder:
        raw, wav = Path(folder) / "raw.wav", Path(folder) / "speech.wav"
        command = ["espeak-ng", "-v", voice, "-s", str(wpm), "-p", str(pitch), "-w", str(raw)]
        subprocess.run([*command, text], check=True, timeout=60)
        # -D: no dither, so a voice says a question with the same samples in every run
        resample_command = ["sox", "-D", str(raw), "-r", str(SAMPLE_RATE), "-c", "1", "-b", "16"]
        subprocess.run([*resample_command, str(wav)], check=True, timeout=60)
        return read_wav(wav)


def trim(samples: np.ndarray, level: float = 0.01) -> np.ndarray:
    """``samples`` from the first to the last one louder than ``level``."""
    loud = np.nonzero(np.abs(samples) > level)[0]
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


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
