"""Shipped model files and the registry of known checkpoints.

The engine finds these through the ``quicksilver.checkpoints`` entry points declared in
``pyproject.toml`` (``Engine.load("bundled")``), so it never imports this package itself.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent

SHIPPED = {"reasoner-tiny": HERE / "reasoner_tiny"}
BUNDLED = "reasoner-tiny"

# Open diffusion language models for users with a GPU (Hugging Face ids); see README.
KNOWN_HUB_MODELS = {
    "llada-8b-instruct": "GSAI-ML/LLaDA-8B-Instruct",
    "dream-7b-instruct": "Dream-org/Dream-v0-Instruct-7B",
}


def path(name: str) -> Path:
    """The folder of a shipped model, by name."""
    if name not in SHIPPED:
        raise FileNotFoundError(f"no shipped model named {name!r}; shipped: {sorted(SHIPPED)}")
    return SHIPPED[name]


def bundled() -> Path:
    """The default model of ``quicksilver`` and of ``Engine.load("bundled")``."""
    return path(BUNDLED)


def reasoner_tiny() -> Path:
    return path("reasoner-tiny")
