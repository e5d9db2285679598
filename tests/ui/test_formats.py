"""The audio formats a websocket client may choose: G.711 against the standard's own
code points, PCM16 at other rates through the resampler, and clear refusals."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from quicksilver.ui.server.formats import (
    AudioFormat,
    Formats,
    alaw_decode,
    alaw_encode,
    chosen_format,
    ulaw_decode,
    ulaw_encode,
)


def test_g711_code_points_match_the_standard():
    # μ-law: 0xFF and 0x7F are the two zeros, 0x00 the most negative, 0x80 the most positive
    assert ulaw_decode(bytes([0xFF, 0x7F, 0x00, 0x80])).tolist() == [0, 0, -32124, 32124]
    assert ulaw_encode(np.array([0], np.int16)) == bytes([0xFF])
    # A-law: 0xD5 / 0x55 the smallest positive / negative step, 0xAA / 0x2A the largest
    assert alaw_decode(bytes([0xD5, 0x55, 0xAA, 0x2A])).tolist() == [8, -8, 32256, -32256]
    assert alaw_encode(np.array([0], np.int16)) == bytes([0xD5])


@pytest.mark.parametrize(
    ("encode", "decode"), [(ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)]
)
def test_g711_round_trip_keeps_speech_level_audio_at_telephone_quality(encode, decode):
    t = np.arange(8000) / 8000
    signal = (8000 * np.sin(2 * np.pi * 440 * t) * np.linspace(0.05, 1, t.size)).astype(np.int16)
    back = decode(encode(signal)).astype(np.float64)
    noise = np.mean((back - signal) ** 2)
    snr_db = 10 * np.log10(np.mean(signal.astype(np.float64) ** 2) / noise)
    assert snr_db > 30  # G.711 gives about 38 dB over its range
    assert np.all(np.sign(back[np.abs(signal) > 64]) == np.sign(signal[np.abs(signal) > 64]))


def test_a_client_rate_is_converted_to_the_sessions_16_khz_and_back():
    formats = Formats(input=AudioFormat("pcm16", 48000), output=AudioFormat("pcm16", 24000),
                      voice_rate=22050)  # fmt: skip
    tone = (0.3 * np.sin(2 * np.pi * 300 * np.arange(48000) / 48000) * 32767).astype("<i2")
    heard = np.concatenate([formats.decode(chunk.tobytes()) for chunk in np.split(tone, 50)])
    assert abs(heard.size - 16000) <= 32  # a second stays a second (less the filter delay)
    assert 0.2 < np.sqrt(np.mean(heard[2000:] ** 2)) / 0.3 * np.sqrt(2) < 1.1
    spoken = formats.encode(np.zeros(22050, np.float32))
    assert len(base64.b64decode(spoken)) == 2 * 24000


def test_formats_that_cannot_be_are_refused_with_the_reason():
    with pytest.raises(ValueError, match="not one of pcm16, g711_ulaw, g711_alaw"):
        AudioFormat("opus", 48000)
    with pytest.raises(ValueError, match="g711_ulaw is 8000 Hz audio"):
        AudioFormat("g711_ulaw", 16000)
    with pytest.raises(ValueError, match="8000–48000 Hz"):
        AudioFormat("pcm16", 96000)
    with pytest.raises(ValueError, match="even number of bytes"):
        Formats().decode(b"\x00\x01\x02")


def test_a_chosen_format_keeps_or_implies_its_rate():
    pcm24 = AudioFormat("pcm16", 24000)
    assert chosen_format("g711_alaw", None, pcm24, 16000) == AudioFormat("g711_alaw", 8000)
    assert chosen_format("pcm16", None, pcm24, 16000) == pcm24
    assert chosen_format("pcm16", None, AudioFormat("g711_ulaw", 8000), 16000).rate == 16000
    assert chosen_format("pcm16", 44100, pcm24, 16000).rate == 44100
