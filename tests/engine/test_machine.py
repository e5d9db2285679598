"""Naming the machine a figure was measured on (engine/machine.py)."""

from __future__ import annotations

import os
import sys

import pytest
import torch
from quicksilver.engine import machine
from quicksilver.engine.machine import describe, describe_cpu, usable_cores

XEON = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw amx_bf16 amx_tile amx_int8

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw amx_bf16 amx_tile amx_int8
"""
EPYC = """processor\t: 0
model name\t: AMD EPYC 7B13
flags\t\t: fpu sse2 avx avx2 fma
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd evtstrm aes crc32
"""


def test_the_widest_vector_instructions_and_any_matrix_unit_are_named():
    assert describe_cpu(XEON, cores=2) == (
        "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz, 2 cores, AVX-512, AMX"
    )
    assert describe_cpu(EPYC, cores=2) == "AMD EPYC 7B13, 2 cores, AVX2"
    assert describe_cpu(EPYC, cores=1) == "AMD EPYC 7B13, 1 core, AVX2"
    arm = describe_cpu(ARM, cores=4)  # no model name: the platform's word for it
    assert arm.endswith(", 4 cores, NEON") and not arm.startswith(",")
    assert describe_cpu("", cores=2).endswith(", 2 cores")  # nothing known but the cores


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/cpuinfo, Linux only")
def test_this_machine_is_described_by_its_own_processor_and_usable_cores():
    with open("/proc/cpuinfo") as cpuinfo:
        names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    described = describe_cpu()
    assert described.startswith(names[0] if names else describe_cpu(""))
    assert f", {usable_cores()} core" in described
    assert 1 <= usable_cores() <= len(os.sched_getaffinity(0))


def test_a_cgroup_quota_caps_the_cores_and_missing_files_fall_back(monkeypatch):
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}  # 1.5 CPUs of quota: 2 cores
    monkeypatch.setattr(machine, "_read", lambda path: files.get(path, ""))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert usable_cores() == 2
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"  # no quota: the affinity
    assert usable_cores() == 64
    monkeypatch.delattr(os, "sched_getaffinity")  # not on Linux: every core
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert usable_cores() == 8
    assert describe_cpu().endswith(", 8 cores")  # no /proc/cpuinfo to read: no name, no flags
    assert machine._read("/nonexistent/cpuinfo") == ""


def test_a_gpu_is_named_by_cuda_and_anything_else_as_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert describe("cuda") == "NVIDIA H100 80GB HBM3"  # named by the driver, no CUDA needed here
    assert describe(torch.device("cpu")) == describe_cpu()
