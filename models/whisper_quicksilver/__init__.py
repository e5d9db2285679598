"""Whisper tiny.en fine-tuned on the assistant's spoken questions (a LoRA encoder adapter).

``build_model(base)`` gives the CTranslate2 folder to load; the registry name is
``tiny.en-quicksilver`` (``quicksilver.models.whisper_tiny_quicksilver``). The recipe is
``train.py``, the figures are in ``MODEL_CARD.md``.
"""

from .merge import build_model

__all__ = ["build_model"]
