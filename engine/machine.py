"""Which machine a figure was measured on: a latency means little without it.

The same 16-step answer takes 61 ms on a 2-core Xeon with AVX-512 and AMX and 218 ms on
a 2-core EPYC with AVX2 only (BENCHMARKS.md), so the card and ``quicksilver eval`` name
the processor, its cores and its widest vector instructions beside every time they give.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch

# Widest first: the first found is the one a float32 matrix product runs on.
_VECTOR_UNITS = (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("asimd", "NEON"))
_MATRIX_UNITS = (("amx_tile", "AMX"),)


def describe_cpu(cpuinfo: str | None = None, cores: int | None = None) -> str:
    """The processor's name, the cores this process may use and its widest vector (and
    any matrix) instructions, from ``/proc/cpuinfo`` where there is one: "AMD EPYC, 2
    cores, AVX2"."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text(errors="replace") if path.is_file() else ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    name = fields.get("model name") or platform.processor() or platform.machine() or "CPU"
    flags = set((fields.get("flags") or fields.get("features") or "").split())
    units = [next((label for flag, label in _VECTOR_UNITS if flag in flags), None)]
    units += [label for flag, label in _MATRIX_UNITS if flag in flags]
    cores = cores or _usable_cores()
    return ", ".join([name, f"{cores} core{'s' * (cores != 1)}", *filter(None, units)])


def describe(device: torch.device | str = "cpu") -> str:
    """The machine a model on ``device`` runs on: the GPU's name, or :func:`describe_cpu`."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return describe_cpu()


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
