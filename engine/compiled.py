"""The model's forward pass compiled for the sampler's repeating shapes (issue 25).

A denoising pass has the same shape every step: the canvas length is fixed, and
:class:`~engine.sampler.Canvases` rounds its prompt columns up to a multiple of
``bucket`` (the extra columns are left padding that no row attends to), so every pass
of an answer, and of the next answer whose prompt falls in the same bucket, runs one
compiled graph. On the CPU that is Inductor's fused C++; on CUDA the graph is also
captured and replayed as a CUDA graph (``mode="reduce-overhead"``), one launch for a
pass's hundreds of kernels, which is what bounds a batch-1 pass on a large GPU
(BENCHMARKS.md, Engine).

Sizes that change between answers (the batch, a bucket) are left to torch.compile's
automatic dynamic shapes: one recompile makes such a size symbolic instead of compiling
each value, while CUDA graphs are recorded once per concrete shape, which the buckets
keep few. A pass that writes a prompt cache mutates the cache tensors, which CUDA
graphs do not capture: such passes run compiled, kernel by kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .model import Transformer

BUCKET = 64  # prompt columns are a multiple of this when compiled


def compile_by_default(device: torch.device) -> bool:
    """Compiled on CUDA, where launches bound a pass; eager on the CPU, where a pass is
    arithmetic and a compile costs tens of seconds at start-up."""
    return device.type == "cuda"


class CompiledForward:
    """``model``'s forward through ``torch.compile``; called as the model is."""

    def __init__(self, model: Transformer, bucket: int = BUCKET) -> None:
        if bucket < 1:
            raise ValueError(f"bucket must be at least 1, got {bucket}")
        self.model, self.bucket = model, bucket
        device = next(model.parameters()).device
        self.cuda_graphs = device.type == "cuda"
        cos, sin = model.rope(device)  # built now: a lazy build would guard every call
        if self.cuda_graphs:  # the tables stay put, so the graphs need not copy them in
            torch._dynamo.mark_static_address(cos)
            torch._dynamo.mark_static_address(sin)
        # Each bucket, batch size and block window may cost one recompile before it
        # turns dynamic; the default limit of 8 would silently fall back to eager.
        config = torch._dynamo.config
        config.recompile_limit = max(config.recompile_limit, 64)
        self._forward = torch.compile(
            model, mode="reduce-overhead" if self.cuda_graphs else None, fullgraph=True
        )

    def __call__(self, tokens: Tensor, **options) -> Tensor:
        if self.cuda_graphs:  # the previous pass's logits are consumed: its memory is free
            torch.compiler.cudagraph_mark_step_begin()
        return self._forward(tokens, **options)
