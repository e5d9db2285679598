"""Quicksilver's diffusion reasoning engine: a masked-diffusion language model that
writes a whole reasoned answer in a fixed number of parallel denoising steps.

Embeddable on its own: it imports nothing else of the project, does no I/O besides
reading and writing checkpoints, and logs through :mod:`logging`.
"""

__version__ = "0.1.0"
