"""Quicksilver's diffusion reasoning engine: a masked-diffusion language model that
writes a whole reasoned answer in a fixed number of parallel denoising steps.

Embeddable on its own: it imports nothing else of the project, does no I/O besides
reading and writing checkpoints, and logs through :mod:`logging`.

>>> from quicksilver.engine import Engine, ModelConfig
>>> engine = Engine.random(ModelConfig(n_layers=2, d_model=64, n_heads=4), seed=0)
>>> engine.answer("what is 17 times 3", steps=8, max_new_tokens=32).forward_passes
8
"""

from .api import Answer, DenoiseFrame, Engine
from .model import ModelConfig
from .routing import RoutedEngine, RoutedScheduler, scheduler_for
from .sampler import SamplerConfig
from .scheduler import Handle, Scheduler
from .tokenizer import MASK_GLYPH, ChatTemplate, SpecialTokens, Tokenizer

__version__ = "0.1.0"

__all__ = [
    "MASK_GLYPH",
    "Answer",
    "ChatTemplate",
    "DenoiseFrame",
    "Engine",
    "Handle",
    "ModelConfig",
    "RoutedEngine",
    "RoutedScheduler",
    "SamplerConfig",
    "Scheduler",
    "SpecialTokens",
    "Tokenizer",
    "__version__",
    "scheduler_for",
]
