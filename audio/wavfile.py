"""Read any common WAV file as 16 kHz mono float32, and write WAV files.

Python's ``wave`` module (3.11) refuses float and WAVE_FORMAT_EXTENSIBLE files, which
many recorders and editors write, so the RIFF chunks are parsed here; every failure
becomes an :class:`AudioFileError` that says what is wrong and how to fix it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from quicksilver.audio.resample import resample

_PCM, _FLOAT, _EXTENSIBLE = 0x0001, 0x0003, 0xFFFE
_CODEC_NAMES = {0x0002: "Microsoft ADPCM", 0x0006: "A-law", 0x0007: "µ-law", 0x0011: "IMA ADPCM",
                0x0055: "MP3", 0x2000: "AC-3"}  # fmt: skip
_CONVERT_HINT = "convert it with: sox IN -r 16000 -c 1 -b 16 OUT.wav"


class AudioFileError(ValueError):
    """A WAV file that cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class WavInfo:
    """What a WAV file holds, as read from its header."""

    sample_rate: int
    channels: int
    sample_width: int  # bytes per sample
    is_float: bool
    frames: int

    @property
    def duration_s(self) -> float:
        return self.frames / self.sample_rate


def _parse(path: Path) -> tuple[WavInfo, bytes]:
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise AudioFileError(f"{path} is a folder, not a WAV file")
    data = path.read_bytes()
    if not data:
        raise AudioFileError(f"{path} is empty (0 bytes): record or export it again")
    if len(data) < 12 or data[:4] not in (b"RIFF", b"RIFX") or data[8:12] != b"WAVE":
        raise AudioFileError(f"{path} is not a WAV file (no RIFF/WAVE header); {_CONVERT_HINT}")
    if data[:4] == b"RIFX":
        raise AudioFileError(f"{path} is a big-endian (RIFX) WAV; {_CONVERT_HINT}")
    fmt: bytes | None = None
    payload: bytes | None = None
    offset = 12
    while offset + 8 <= len(data):
        chunk_id, size = data[offset : offset + 4], struct.unpack_from("<I", data, offset + 4)[0]
        body = data[offset + 8 : offset + 8 + size]  # a truncated last chunk keeps what is there
        if chunk_id == b"fmt ":
            fmt = body
        elif chunk_id == b"data":
            payload = body
            if fmt is not None:
                break
        offset += 8 + size + (size & 1)
    if fmt is None or len(fmt) < 16:
        raise AudioFileError(f"{path} is corrupt: it has no valid 'fmt ' chunk; {_CONVERT_HINT}")
    if payload is None:
        raise AudioFileError(f"{path} is corrupt: it has no 'data' chunk; {_CONVERT_HINT}")
    code, channels, rate, _, block_align, bits = struct.unpack_from("<HHIIHH", fmt)
    if code == _EXTENSIBLE and len(fmt) >= 26:
        code = struct.unpack_from("<H", fmt, 24)[0]  # first two bytes of the sub-format GUID
    if code not in (_PCM, _FLOAT):
        name = _CODEC_NAMES.get(code, f"format code {code:#06x}")
        raise AudioFileError(f"{path} is compressed ({name}), which is not supported; "
                             f"{_CONVERT_HINT}")  # fmt: skip
    width = (bits + 7) // 8
    if channels < 1 or rate < 1 or width not in (1, 2, 3, 4, 8) or block_align != width * channels:
        raise AudioFileError(
            f"{path} has an invalid header ({channels} channels, {rate} Hz, {bits} bits); "
            f"{_CONVERT_HINT}"
        )
    if (code == _FLOAT and width not in (4, 8)) or (code == _PCM and width == 8):
        raise AudioFileError(f"{path} has an unsupported {bits}-bit sample format; {_CONVERT_HINT}")
    frames = len(payload) // block_align
    info = WavInfo(rate, channels, width, code == _FLOAT, frames)
    return info, payload[: frames * block_align]


def wav_info(path: str | Path) -> WavInfo:
    """Return the format of a WAV file without decoding its samples."""
    return _parse(Path(path))[0]


def _decode(info: WavInfo, payload: bytes) -> np.ndarray:
    """Samples as float32 in [-1, 1], shape (frames, channels)."""
    width = info.sample_width
    if info.is_float:
        samples = np.frombuffer(payload, dtype="<f4" if width == 4 else "<f8").astype(np.float32)
        samples = np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0)
    elif width == 1:  # 8-bit WAV is unsigned
        samples = (np.frombuffer(payload, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 3:
        raw = np.frombuffer(payload, dtype=np.uint8).reshape(-1, 3).astype(np.int32)
        value = raw[:, 0] | (raw[:, 1] << 8) | (raw[:, 2] << 16)
        samples = (np.where(value >= 1 << 23, value - (1 << 24), value) / float(1 << 23)).astype(
            np.float32
        )
    else:
        dtype = "<i2" if width == 2 else "<i4"
        samples = np.frombuffer(payload, dtype=dtype).astype(np.float32) / float(
            1 << (8 * width - 1)
        )
    return samples.reshape(-1, info.channels)


def read_wav(path: str | Path, sample_rate: int | None = 16000) -> np.ndarray:
    """Read a WAV file as mono float32 at ``sample_rate`` (None keeps the file's rate).

    Any channel count is averaged to mono; 8/16/24/32-bit integer and 32/64-bit float
    samples are accepted. Raises :class:`AudioFileError` for empty, corrupt or
    compressed files, and when the file holds no samples at all.
    """
    path = Path(path)
    info, payload = _parse(path)
    if info.frames == 0:
        raise AudioFileError(f"{path} holds no audio samples (0 s): record or export it again")
    mono = _decode(info, payload).mean(axis=1, dtype=np.float32)
    if sample_rate is None or sample_rate == info.sample_rate:
        return mono
    return resample(mono, info.sample_rate, sample_rate)


def check_output_path(path: str | Path) -> Path:
    """``path`` if a WAV file can be written there, else an :class:`AudioFileError` that
    says why; call it before any slow work, so a typo costs nothing."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise AudioFileError(f"{path} is a folder; give a file name, e.g. {path / 'answer.wav'}")
    if not path.parent.is_dir():
        raise AudioFileError(f"cannot write {path}: the folder {path.parent} does not exist")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise AudioFileError(f"cannot write {path}: permission denied; choose another place")
    return path


def write_wav(path: str | Path, samples: np.ndarray, sample_rate: int) -> None:
    """Write mono float samples in [-1, 1] as a 16-bit PCM WAV (values beyond are clipped)."""
    samples = np.asarray(samples, dtype=np.float32).reshape(-1)
    pcm = (np.clip(np.nan_to_num(samples), -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", 36 + len(pcm), b"WAVE", b"fmt ", 16, _PCM, 1, int(sample_rate),
        int(sample_rate) * 2, 2, 16, b"data", len(pcm),
    )  # fmt: skip
    Path(path).write_bytes(header + pcm)
