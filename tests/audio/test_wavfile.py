"""WAV reading: every common layout to 16 kHz mono, and clear errors for bad files."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from quicksilver.audio.resample import Resampler, resample
from quicksilver.audio.wavfile import AudioFileError, read_wav, wav_info, write_wav

RATE = 16000


@pytest.fixture(scope="module")
def reference(tmp_path_factory, espeak):
    """Speech written as a plain 16 kHz 16-bit WAV, and its samples."""
    path = tmp_path_factory.mktemp("wav") / "ref.wav"
    samples = espeak("Set a timer for ten minutes.")
    write_wav(path, samples, RATE)
    return path, read_wav(path)


@pytest.mark.parametrize(
    ("sox_args", "rate", "channels", "width", "is_float"),
    [
        (["-r", "48000", "-c", "2", "-b", "16"], 48000, 2, 2, False),  # 48 kHz stereo
        (["-r", "8000", "-b", "8", "-e", "unsigned-integer"], 8000, 1, 1, False),  # 8-bit
        (["-r", "44100", "-b", "24"], 44100, 1, 3, False),
        (["-r", "22050", "-b", "32", "-e", "floating-point"], 22050, 1, 4, True),
        (["-r", "16000", "-b", "32", "-e", "signed-integer", "-c", "4"], 16000, 4, 4, False),
    ],
)
def test_common_layouts_read_as_16k_mono(reference, tmp_path, sox_args, rate, channels,
                                         width, is_float):  # fmt: skip
    source, expected = reference
    path = tmp_path / "converted.wav"
    subprocess.run(["sox", str(source), *sox_args, str(path)], check=True, timeout=60)
    info = wav_info(path)
    assert (info.sample_rate, info.channels, info.sample_width, info.is_float) == (
        rate, channels, width, is_float)  # fmt: skip
    samples = read_wav(path)
    assert samples.dtype == np.float32 and samples.ndim == 1
    assert abs(samples.size - expected.size) <= 2
    n = min(samples.size, expected.size)
    # 8 kHz keeps only the band below 4 kHz, so it correlates less
    assert np.corrcoef(samples[:n], expected[:n])[0, 1] > (0.9 if rate == 8000 else 0.99)


def test_write_then_read_round_trips(tmp_path):
    tone = 0.5 * np.sin(2 * np.pi * 440 * np.arange(RATE) / RATE).astype(np.float32)
    write_wav(tmp_path / "tone.wav", tone, RATE)
    back = read_wav(tmp_path / "tone.wav")
    assert np.abs(back - tone).max() < 1e-4


def test_keeps_native_rate_when_asked(reference):
    path, expected = reference
    assert read_wav(path, sample_rate=None).size == expected.size


def test_empty_file(tmp_path):
    (tmp_path / "empty.wav").write_bytes(b"")
    with pytest.raises(AudioFileError, match="empty"):
        read_wav(tmp_path / "empty.wav")


def test_header_without_samples(tmp_path):
    write_wav(tmp_path / "nothing.wav", np.zeros(0, np.float32), RATE)
    with pytest.raises(AudioFileError, match="no audio samples"):
        read_wav(tmp_path / "nothing.wav")


def test_not_a_wav(tmp_path):
    (tmp_path / "song.wav").write_bytes(b"ID3\x03\x00" + bytes(200))
    with pytest.raises(AudioFileError, match=r"not a WAV file.*sox"):
        read_wav(tmp_path / "song.wav")


def test_corrupt_header(tmp_path):
    rng = np.random.default_rng(1)
    (tmp_path / "bad.wav").write_bytes(b"RIFF\x00\x10\x00\x00WAVE" + rng.bytes(300))
    with pytest.raises(AudioFileError, match=r"corrupt|invalid"):
        read_wav(tmp_path / "bad.wav")


def test_truncated_file_reads_what_is_there(reference, tmp_path):
    source, expected = reference
    data = source.read_bytes()
    (tmp_path / "cut.wav").write_bytes(data[: len(data) // 2 + 1])  # odd cut mid-sample
    samples = read_wav(tmp_path / "cut.wav")
    assert abs(samples.size - expected.size // 2) < 100
    np.testing.assert_allclose(samples, expected[: samples.size], atol=1e-4)


def test_compressed_wav_is_named(reference, tmp_path):
    source, _ = reference
    path = tmp_path / "ulaw.wav"
    subprocess.run(["sox", str(source), "-e", "u-law", str(path)], check=True, timeout=60)
    with pytest.raises(AudioFileError, match=r"µ-law.*sox"):
        read_wav(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_wav(tmp_path / "absent.wav")
    with pytest.raises(AudioFileError, match="folder"):
        read_wav(tmp_path)


@pytest.mark.parametrize(("src", "dst"), [(48000, 16000), (44100, 16000), (16000, 22050)])
def test_resampler_blocks_join_seamlessly_and_keep_tones(src, dst):
    rng = np.random.default_rng(0)
    signal = np.sin(2 * np.pi * 300 * np.arange(src) / src).astype(np.float32)
    signal += 0.01 * rng.standard_normal(src).astype(np.float32)
    streaming = Resampler(src, dst)
    streamed = np.concatenate(
        [streaming.process(signal[i : i + 997]) for i in range(0, signal.size, 997)]
    )
    at_once = Resampler(src, dst).process(signal)
    np.testing.assert_allclose(streamed, at_once, atol=1e-5)
    whole = resample(signal, src, dst)  # delay-compensated
    assert abs(whole.size - dst) <= 1
    tone = np.sin(2 * np.pi * 300 * np.arange(whole.size) / dst)
    assert np.abs(whole - tone)[200:-200].max() < 0.05  # the noise, not a shift
    if dst < src:  # a tone above the new Nyquist frequency is removed, not folded back
        high = np.sin(2 * np.pi * 0.6 * dst * np.arange(src) / src).astype(np.float32)
        assert np.abs(resample(high, src, dst)[200:-200]).max() < 0.01
