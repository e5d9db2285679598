"""What part of a spoken answer the user actually heard, for barge-in.

The speaker counts the seconds of audio it handed to the device; the answer was queued
as one chunk per sentence with known durations. Laying one over the other gives the
words that were said (a partly played sentence is cut in proportion to its duration),
and everything after them was dropped. Those words, not the whole answer, go into the
conversation's memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
from quicksilver.audio.tts import spoken_pieces
from quicksilver.audio.wavfile import write_wav


class AudioOutput(Protocol):
    """Where answers are played (``audio.Speaker`` is one)."""

    sample_rate: int

    def play(self, samples: np.ndarray) -> None: ...

    def stop(self) -> float: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    @property
    def played_s(self) -> float: ...

    def close(self) -> None: ...


class StreamOutput:
    """An :class:`AudioOutput` with no clock of its own: each answer chunk goes to
    ``send`` at once and counts as played (a websocket client plays it, or a file keeps
    it), so a barge-in keeps the words already sent."""

    def __init__(self, sample_rate: int, send: Callable[[np.ndarray], None]) -> None:
        self.sample_rate = sample_rate
        self._send = send
        self._samples = 0

    def play(self, samples: np.ndarray) -> None:
        self._samples += len(samples)
        self._send(samples)

    def stop(self) -> float:
        return self.played_s

    def wait(self, timeout: float | None = None) -> bool:
        return True

    @property
    def played_s(self) -> float:
        return self._samples / self.sample_rate

    def close(self) -> None:
        """Nothing to release: every chunk is already where it was sent."""


class WavOutput(StreamOutput):
    """Keeps every answer and writes one WAV file at :meth:`close`: the spoken answers
    of a session run on a recording."""

    def __init__(self, path: str | Path, sample_rate: int) -> None:
        self.path = Path(path)
        self._chunks: list[np.ndarray] = []
        super().__init__(sample_rate, lambda samples: self._chunks.append(samples))

    def close(self) -> None:
        chunks = [np.asarray(c, dtype=np.float32) for c in self._chunks]
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        write_wav(self.path, audio, self.sample_rate)


@dataclass
class Playback:
    """One answer on the speaker: the chunks queued so far and where the speaker stood."""

    text: str
    start_s: float  # the speaker's ``played_s`` when the first chunk was queued
    chunks: list[tuple[str, float]] = field(default_factory=list)  # (text, seconds)

    def queued(self, text: str, duration_s: float) -> None:
        self.chunks.append((text, duration_s))

    def heard(self, played_s: float) -> tuple[str, str]:
        """``(spoken, dropped)`` words, given the speaker's ``played_s`` at the stop."""
        left = played_s - self.start_s
        said: list[str] = []
        for text, duration in self.chunks:
            words = text.split()
            if left >= duration:
                said += words
                left -= duration
                continue
            said += words[: int(len(words) * max(left, 0.0) / duration)] if duration > 0 else []
            break
        every = " ".join(spoken_pieces(self.text)).split()
        return " ".join(said), " ".join(every[len(said) :])
