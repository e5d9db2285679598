"""Which machine a figure was measured on: a latency means little without it.

The same 16-step answer takes 61 ms on a 2-core Xeon with AVX-512 and AMX (the card, one
thread of work) and 239 ms on a 2-core EPYC with AVX2 only (one thread; BENCHMARKS.md),
so the card and ``quicksilver eval`` name the processor, its cores and its widest vector
instructions beside every time they give.
"""

from __future__ import annotations

import math
import os
import platform
from pathlib import Path

import torch

# The hardware's widest vector extension first (what a library may dispatch to; torch
# and oneDNN choose for themselves within it), then any matrix unit.
_VECTOR_UNITS = (
    ("avx512f", "AVX-512"),
    ("avx2", "AVX2"),
    ("avx", "AVX"),
    ("sve2", "SVE2"),
    ("sve", "SVE"),
    ("asimd", "NEON"),
    ("neon", "NEON"),
)
_MATRIX_UNITS = (("amx_tile", "AMX"), ("sme", "SME"))


def describe_cpu(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """The processor's name, the cores this process may use and its widest vector (and
    any matrix) instructions, from ``/proc/cpuinfo`` where it can be read: "AMD EPYC, 2
    cores, AVX2"."""
    if cpuinfo is None:
        cpuinfo = _read("/proc/cpuinfo")
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine() or "CPU"
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    count = cores or usable_cores()
    parts = [name, f"{count} core{'s' * (count != 1)}"]
    vector = next((label for flag, label in _VECTOR_UNITS if flag in flags), None)
    if vector:
        parts.append(vector)
    parts += [label for flag, label in _MATRIX_UNITS if flag in flags]
    return ", ".join(parts)


def describe(device: torch.device | str = "cpu") -> str:
    """The machine a model on ``device`` runs on: the GPU's name on CUDA, else
    :func:`describe_cpu` (other accelerators are not told apart)."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return describe_cpu()


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, capped by a cgroup CPU quota
    (a container limited to 2 CPUs on a 64-core host has 2)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota, _, period = _read("/sys/fs/cgroup/cpu.max").partition(" ")
    if quota.isdigit() and period.strip().isdigit() and int(period):
        cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    return cores


def _read(path: str) -> str:
    """A system file's text, or "" where there is none or it cannot be read."""
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return ""
