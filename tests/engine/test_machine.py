"""Naming the machine a figure was measured on (engine/machine.py)."""

from __future__ import annotations

import os

from quicksilver.engine.machine import describe, describe_cpu

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


def test_this_machine_is_described_by_its_own_processor_and_usable_cores():
    cores = len(os.sched_getaffinity(0))
    assert describe("cpu") == describe_cpu()
    assert f", {cores} core" in describe_cpu()
    with open("/proc/cpuinfo") as cpuinfo:
        names = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    assert not names or describe_cpu().startswith(names[0])
