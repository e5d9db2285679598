"""Whisper, Piper and the engine each get the settings' thread budget, not a thread per
core: in one process on a small shared CPU the libraries' defaults preempt one another.
Piper, which speaks once the others are done, takes every core unless told otherwise."""

from __future__ import annotations

import os

import torch
from quicksilver.assistant.config import (
    Settings,
    load_settings,
    thread_budget,
    voice_thread_budget,
)
from quicksilver.assistant.factory import build_session
from quicksilver.assistant.loading import load_voice
from quicksilver.assistant.wiring import Wiring
from quicksilver.engine import machine
from quicksilver.engine.machine import usable_cores


def test_the_default_budget_is_half_the_cores():
    assert thread_budget(0) == max(1, usable_cores() // 2)
    assert thread_budget(3) == 3
    settings, sources = load_settings({}, env={"QUICKSILVER_THREADS": "2"})
    assert settings.threads == 2 and sources["threads"] == "environment QUICKSILVER_THREADS"


def test_piper_takes_every_core_unless_a_budget_is_set():
    assert voice_thread_budget(0) == usable_cores()
    assert voice_thread_budget(3) == 3
    voice = load_voice(Settings().voice, 0)
    options = voice._piper.session.get_session_options()
    assert options.intra_op_num_threads == usable_cores()


def test_the_budgets_count_the_cores_this_process_may_use_not_the_hosts(monkeypatch):
    """A container pinned to 2 CPUs of a 64-core host: the host's count would give each
    library 32 threads on 2 cores, the oversubscription the budgets exist to prevent."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(machine, "_read", lambda path: "")  # no cgroup quota on the host
    assert thread_budget(0) == 1
    assert voice_thread_budget(0) == 2


def test_the_session_gives_each_component_its_budget(tmp_path):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        wiring = Wiring(microphone=False, speech=True, output="file",
                        output_path=tmp_path / "answers.wav", log=False)  # fmt: skip
        # 5: neither the automatic budget nor any library's default on a small machine
        session = build_session(Settings(threads=5), wiring)
        assert torch.get_num_threads() == 5
        assert session.transcribe.transcriber.cpu_threads == 5
        piper = session.speak.voice._piper.session
        assert piper.get_session_options().intra_op_num_threads == 5
    finally:
        torch.set_num_threads(before)
