"""Audio formats a client may choose with ``session.update``: PCM16 at any common rate,
or G.711 μ-law / A-law at 8 kHz, the set the OpenAI Realtime API offers (telephony
bridges send G.711; Realtime clients send 24 kHz PCM16).

The session itself always hears 16 kHz and the voice speaks at its own rate; a
:class:`Formats` converts at the edge of one connection, so nothing else changes.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np
from quicksilver.audio.resample import Resampler, resample

SESSION_RATE = 16000  # what the session's ear hears
CODECS = ("pcm16", "g711_ulaw", "g711_alaw")
G711_RATE = 8000
MIN_RATE, MAX_RATE = 8000, 48000

_ULAW_BIAS, _ULAW_CLIP = 0x84, 32635


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    """float32 samples in [-1, 1] → int16 (clipped, rounded)."""
    return (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype(np.int16)


def from_pcm16(pcm: np.ndarray) -> np.ndarray:
    """int16 samples → float32 in [-1, 1)."""
    return pcm.astype(np.float32) / 32768.0


def encode_audio(samples: np.ndarray) -> str:
    """float32 samples → base64 PCM16 little-endian (the protocol's default audio)."""
    return base64.b64encode(to_pcm16(samples).astype("<i2").tobytes()).decode("ascii")


def decode_audio(data: str) -> np.ndarray:
    """base64 PCM16 little-endian → float32 samples."""
    return from_pcm16(np.frombuffer(base64.b64decode(data), "<i2"))


def ulaw_decode(data: bytes) -> np.ndarray:
    """G.711 μ-law bytes → int16 samples (ITU-T G.711's expansion)."""
    u = ~np.frombuffer(data, np.uint8).astype(np.int32) & 0xFF
    exponent, mantissa = (u >> 4) & 0x07, u & 0x0F
    magnitude = (((mantissa << 3) + _ULAW_BIAS) << exponent) - _ULAW_BIAS
    return np.where(u & 0x80, -magnitude, magnitude).astype(np.int16)


def ulaw_encode(samples: np.ndarray) -> bytes:
    """int16 samples → G.711 μ-law bytes."""
    x = samples.astype(np.int32)
    sign = np.where(x < 0, 0x80, 0)
    biased = np.minimum(np.abs(x), _ULAW_CLIP) + _ULAW_BIAS
    exponent = np.clip(np.floor(np.log2(biased)).astype(np.int32) - 7, 0, 7)
    mantissa = (biased >> (exponent + 3)) & 0x0F
    return (~(sign | (exponent << 4) | mantissa) & 0xFF).astype(np.uint8).tobytes()


def alaw_decode(data: bytes) -> np.ndarray:
    """G.711 A-law bytes → int16 samples."""
    a = np.frombuffer(data, np.uint8).astype(np.int32) ^ 0x55
    exponent, mantissa = (a >> 4) & 0x07, a & 0x0F
    magnitude = np.where(
        exponent == 0, (mantissa << 4) + 8, ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0)
    )
    return np.where(a & 0x80, magnitude, -magnitude).astype(np.int16)


def alaw_encode(samples: np.ndarray) -> bytes:
    """int16 samples → G.711 A-law bytes."""
    x = samples.astype(np.int32)
    sign = np.where(x >= 0, 0x80, 0)
    magnitude = np.minimum(np.abs(x), 32767)
    exponent = np.clip(np.floor(np.log2(np.maximum(magnitude, 1))).astype(np.int32) - 7, 0, 7)
    mantissa = np.where(exponent == 0, magnitude >> 4, magnitude >> (exponent + 3)) & 0x0F
    return ((sign | (exponent << 4) | mantissa) ^ 0x55).astype(np.uint8).tobytes()


_DECODE = {
    "pcm16": lambda data: np.frombuffer(data, "<i2"),
    "g711_ulaw": ulaw_decode,
    "g711_alaw": alaw_decode,
}
_ENCODE = {
    "pcm16": lambda pcm: pcm.astype("<i2").tobytes(),
    "g711_ulaw": ulaw_encode,
    "g711_alaw": alaw_encode,
}


@dataclass(frozen=True)
class AudioFormat:
    """One direction's audio: its codec and sample rate."""

    codec: str = "pcm16"
    rate: int = SESSION_RATE

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f"audio format {self.codec!r} is not one of {', '.join(CODECS)}")
        if self.codec != "pcm16" and self.rate != G711_RATE:
            raise ValueError(f"{self.codec} is {G711_RATE} Hz audio, not {self.rate} Hz")
        if not MIN_RATE <= self.rate <= MAX_RATE:
            raise ValueError(f"a sample rate lies in {MIN_RATE}–{MAX_RATE} Hz, not {self.rate}")

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self.codec == "pcm16" else 1


def chosen_format(
    codec: str, rate: int | None, current: AudioFormat, default_rate: int
) -> AudioFormat:
    """The format a ``session.update`` asks for. Without a rate: 8 kHz for G.711, the
    current rate when the codec stays PCM16, else ``default_rate``."""
    if rate is None:
        if codec != "pcm16":
            rate = G711_RATE
        else:
            rate = current.rate if current.codec == "pcm16" else default_rate
    return AudioFormat(codec, rate)


@dataclass
class Formats:
    """One connection's input and output formats, and the conversions to and from them."""

    input: AudioFormat = field(default_factory=AudioFormat)
    output: AudioFormat = field(default_factory=AudioFormat)
    voice_rate: int = SESSION_RATE
    _resampler: Resampler | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.set_input(self.input)

    def set_input(self, audio_format: AudioFormat) -> None:
        self.input = audio_format
        rate = audio_format.rate
        self._resampler = None if rate == SESSION_RATE else Resampler(rate, SESSION_RATE)

    def decode(self, data: bytes) -> np.ndarray:
        """A client's audio bytes → float32 at the session's 16 kHz."""
        if len(data) % self.input.bytes_per_sample:
            raise ValueError(f"{self.input.codec} audio has an even number of bytes")
        samples = from_pcm16(_DECODE[self.input.codec](data))
        return samples if self._resampler is None else self._resampler.process(samples)

    def encode(self, samples: np.ndarray) -> str:
        """The voice's float32 samples → base64 in the client's output format."""
        converted = resample(samples, self.voice_rate, self.output.rate)
        return base64.b64encode(_ENCODE[self.output.codec](to_pcm16(converted))).decode("ascii")
