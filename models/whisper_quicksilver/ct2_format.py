"""Read and write CTranslate2's ``model.bin``: named arrays, then aliases.

The format is the one ``ctranslate2.specs.ModelSpec`` writes (binary version 6): a
header (version, spec name, spec revision), each variable as name, shape, type and raw
bytes, then aliases (``decoder/projection/weight`` → ``decoder/embeddings/weight``). It
is read here so that a faster-whisper model can be fine-tuned in PyTorch and written
back for CTranslate2 to run, with no other converter installed.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BINARY_VERSION = 6
# The order of CTranslate2's DataType enum; bfloat16 has no numpy type and is refused.
_TYPES = ("float32", "int8", "int16", "int32", "float16")


@dataclass
class Ct2Model:
    """A CTranslate2 model's variables, in file order, and its aliases."""

    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str] = field(default_factory=dict)


class _Reader:
    def __init__(self, data: bytes, source: str) -> None:
        self.data, self.offset, self.source = data, 0, source

    def unpack(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.offset + size > len(self.data):
            raise ValueError(f"{self.source} ends early: not a whole CTranslate2 model.bin")
        (value,) = struct.unpack_from(fmt, self.data, self.offset)
        self.offset += size
        return value

    def string(self) -> str:
        size = self.unpack("H")
        text = self.data[self.offset : self.offset + size - 1].decode("utf-8")
        self.offset += size
        return text

    def raw(self, size: int) -> bytes:
        if self.offset + size > len(self.data):
            raise ValueError(f"{self.source} ends early: not a whole CTranslate2 model.bin")
        chunk = self.data[self.offset : self.offset + size]
        self.offset += size
        return chunk


def read_model(path: str | Path) -> Ct2Model:
    """The variables of a ``model.bin`` (or of the folder holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "model.bin"
    reader = _Reader(path.read_bytes(), str(path))
    version = reader.unpack("I")
    if version != BINARY_VERSION:
        raise ValueError(
            f"{path} is CTranslate2 binary version {version}; this reader knows version "
            f"{BINARY_VERSION} (CTranslate2 4.x)"
        )
    spec, revision = reader.string(), reader.unpack("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(reader.unpack("I")):
        name = reader.string()
        shape = tuple(reader.unpack("I") for _ in range(reader.unpack("B")))
        type_id = reader.unpack("B")
        if type_id >= len(_TYPES):
            raise ValueError(f"{path}: {name} has a data type this reader cannot hold")
        data = reader.raw(reader.unpack("I"))
        variables[name] = np.frombuffer(data, dtype=_TYPES[type_id]).reshape(shape).copy()
    aliases = {reader.string(): reader.string() for _ in range(reader.unpack("I"))}
    return Ct2Model(spec, revision, variables, aliases)


def model_bytes(model: Ct2Model) -> bytes:
    """``model`` as the bytes of a ``model.bin``."""
    out = io.BytesIO()

    def string(text: str) -> None:
        encoded = text.encode("utf-8")
        out.write(struct.pack("H", len(encoded) + 1) + encoded + b"\0")

    out.write(struct.pack("I", BINARY_VERSION))
    string(model.spec)
    out.write(struct.pack("I", model.revision))
    out.write(struct.pack("I", len(model.variables)))
    for name, value in model.variables.items():
        value = np.asarray(value, order="C")  # (ascontiguousarray makes a scalar 1-D)
        string(name)
        out.write(struct.pack("B", value.ndim))
        out.write(struct.pack(f"{value.ndim}I", *value.shape))
        out.write(struct.pack("B", _TYPES.index(value.dtype.name)))
        out.write(struct.pack("I", value.nbytes))
        out.write(value.tobytes())
    out.write(struct.pack("I", len(model.aliases)))
    for alias, target in model.aliases.items():
        string(alias)
        string(target)
    return out.getvalue()
