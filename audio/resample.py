"""Sample-rate conversion for files and live streams.

Microphones often only offer 44.1 or 48 kHz while Silero and Whisper want 16 kHz, and
Piper voices speak at 16 or 22.05 kHz whatever the speaker runs at. One polyphase
windowed-sinc resampler, fed block by block, serves both: a whole file is one block.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np

_ZERO_CROSSINGS = 16  # filter half-length in periods of the lower rate: ~-80 dB stop band
_KAISER_BETA = 8.6
_ROLL_OFF = 0.92  # pass band edge as a fraction of the lower Nyquist frequency


def _delay(up: int, down: int, taps: int) -> int:
    """Filter delay in output samples; the filter is centred on a whole output sample."""
    return round((taps * up - 1) / 2 / down)


@lru_cache(maxsize=16)
def _polyphase_filter(up: int, down: int) -> np.ndarray:
    """Return the prototype low-pass filter split into ``up`` phases, shape (up, taps)."""
    taps = 2 * _ZERO_CROSSINGS * max(1, -(-down // up))
    cutoff = 0.5 * _ROLL_OFF / max(up, down)  # cycles per sample at the upsampled rate
    n = np.arange(taps * up) - _delay(up, down, taps) * down
    prototype = 2 * cutoff * np.sinc(2 * cutoff * n) * np.kaiser(taps * up, _KAISER_BETA) * up
    # Phase p holds prototype[p + k*up] for k = 0..taps-1, applied to x[base - k].
    return prototype.reshape(taps, up).T.astype(np.float32).copy()


class Resampler:
    """Stateful rational resampler: ``process(block)`` returns the output ready so far.

    Blocks may have any length; consecutive outputs join without clicks because the filter
    history and the output phase are carried from one block to the next.
    """

    def __init__(self, from_rate: int, to_rate: int) -> None:
        if from_rate <= 0 or to_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {from_rate} → {to_rate}")
        common = gcd(int(from_rate), int(to_rate))
        self.up = int(to_rate) // common
        self.down = int(from_rate) // common
        self.from_rate = int(from_rate)
        self.to_rate = int(to_rate)
        self._bank = _polyphase_filter(self.up, self.down) if self.up != self.down else None
        self.taps = 0 if self._bank is None else self._bank.shape[1]
        # One sample more than the filter length: when upsampling, the next output may
        # still sit on the last input sample of the previous block.
        self._history = np.zeros(self.taps, dtype=np.float32)
        self._consumed = 0  # input samples received so far
        self._produced = 0  # output samples emitted so far

    def process(self, block: np.ndarray) -> np.ndarray:
        """Resample the next block of mono float samples."""
        block = np.asarray(block, dtype=np.float32).reshape(-1)
        if self._bank is None:
            return block.copy()
        taps = self.taps
        buffer = np.concatenate([self._history, block])
        first_index = self._consumed - taps  # stream index of buffer[0]
        self._consumed += block.size
        # Output n sits at input position n*down/up; it needs input up to floor(n*down/up).
        last = (self._consumed * self.up - 1) // self.down  # largest n with base < consumed
        outputs = np.arange(self._produced, last + 1, dtype=np.int64)
        self._history = buffer[-taps:]
        if outputs.size == 0:
            return np.zeros(0, dtype=np.float32)
        self._produced = int(outputs[-1]) + 1
        position = outputs * self.down
        base = position // self.up - first_index
        phase = position % self.up
        window = base[:, None] - np.arange(taps)[None, :]
        return np.einsum("nk,nk->n", buffer[window], self._bank[phase]).astype(np.float32)


def resample(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Resample a whole mono signal, compensating the filter delay so timing is kept."""
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    if from_rate == to_rate:
        return samples.copy()
    resampler = Resampler(from_rate, to_rate)
    # The causal filter delays the signal by a whole number of output samples; feed zeros
    # to flush it and cut the delay from the front.
    delay_out = _delay(resampler.up, resampler.down, resampler.taps)
    tail = np.zeros(delay_out * resampler.down // resampler.up + 2, dtype=np.float32)
    out = np.concatenate([resampler.process(samples), resampler.process(tail)])
    expected = round(samples.size * to_rate / from_rate)
    return out[delay_out : delay_out + expected]
