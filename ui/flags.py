"""Command-line flags for the settings, written once and shared by every command.

A flag's default is ``argparse.SUPPRESS``: a flag that was not given leaves no value
behind, so a subcommand never overwrites a flag given before it
(``quicksilver --steps 8 ask …``) and the layered settings keep what the config file
or the environment said. Defaults are the settings' own, shown by ``quicksilver config``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from quicksilver.assistant.config import NAMES, Settings, load_settings

# setting name -> (flag, argparse options); the help says the default where it is fixed
FLAGS: dict[str, tuple[str, dict[str, Any]]] = {
    "model": ("--model", {
        "metavar": "NAME",
        "help": "reasoning model: a checkpoint folder, a registered name (llada-8b-instruct) "
        "or a Hugging Face id of a LLaDA or Qwen-layout diffusion model (downloaded once); "
        "default: the model shipped with Quicksilver",
    }),
    "steps": ("--steps", {
        "type": int, "metavar": "N",
        "help": "denoising steps per answer (default: the model's own, 16 for the shipped one)",
    }),
    "device": ("--device", {"help": "where the model runs: cpu, cuda or auto (default)"}),
    "show_thinking": ("--show-thinking", {
        "action": "store_true", "help": "also print the model's hidden reasoning",
    }),
    "whisper_model": ("--whisper-model", {
        "metavar": "NAME",
        "help": "speech recognition: a faster-whisper model name (e.g. base.en, downloaded "
        f"once) or folder (default: the bundled {Settings.whisper_model})",
    }),
    "voice": ("--voice", {
        "metavar": "NAME",
        "help": f"Piper voice name or .onnx path (default: the bundled {Settings.voice})",
    }),
    "input_device": ("--input-device", {
        "metavar": "DEVICE", "help": "microphone: index or part of its name",
    }),
    "output_device": ("--output-device", {
        "metavar": "DEVICE", "help": "speaker: index or part of its name",
    }),
    "hangover_ms": ("--hangover-ms", {
        "type": int, "metavar": "MS",
        "help": f"silence that ends your question, in ms (default {Settings.hangover_ms})",
    }),
    "speculative_ms": ("--speculative-ms", {
        "type": int, "metavar": "MS",
        "help": "silence after which the answer is started early, in ms; 0 turns it off "
        f"(default {Settings.speculative_ms})",
    }),
    "headset": ("--headset", {
        "action": "store_true",
        "help": "you wear headphones: keep listening while the assistant speaks, so you can "
        "interrupt it (with loudspeakers the microphone is muted then, so it never answers "
        "itself)",
    }),
    "semantic_turns": ("--no-semantic-turns", {
        "action": "store_false",
        "help": "end a spoken question after a fixed silence (--hangover-ms) instead of "
        "judging by its sound and words whether it is finished",
    }),
    "voice_ahead": ("--no-voice-ahead", {
        "action": "store_false",
        "help": "synthesise the answer's first sentence only once the answer is final, not "
        "as soon as the denoising has settled it",
    }),
    "max_pause_ms": ("--max-pause-ms", {
        "type": int, "metavar": "MS",
        "help": "silence allowed inside a question that breaks off (\"… times\") before "
        f"it ends anyway (default {Settings.max_pause_ms})",
    }),
    "whole_pause_ms": ("--whole-pause-ms", {
        "type": int, "metavar": "MS",
        "help": "silence that ends a question whose words read whole, unless it sounds "
        f"finished sooner (default {Settings.whole_pause_ms}; --hangover-ms if shorter)",
    }),
    "question_model": ("--no-question-model", {
        "action": "store_false",
        "help": "take Whisper's first hypothesis as heard, instead of letting the model's "
        "question model pick the likeliest question among its five best",
    }),
    "threads": ("--threads", {
        "type": int, "metavar": "N",
        "help": "CPU threads each of Whisper, Piper and the engine may use; 0 (default): "
        "half the cores, so the three never fight over them",
    }),
    "unsure_below": ("--unsure-below", {
        "type": float, "metavar": "P",
        "help": "say \"I'm not sure\" instead of an answer whose confidence (0 to 1) is "
        "below P; 0 turns it off (default: the model's own, in its model card)",
    }),
    "instructions": ("--instructions", {
        "metavar": "TEXT",
        "help": "added to the system message the model reads (the shipped model was not "
        "trained to follow instructions; larger models are)",
    }),
}  # fmt: skip
ENGINE = ("model", "steps", "device", "show_thinking")


def add_setting_flags(group: argparse._ActionsContainer, names: Iterable[str] = FLAGS) -> None:
    """Add the flags of ``names`` (setting names) to ``group``."""
    for name in names:
        flag, options = FLAGS[name]
        group.add_argument(flag, dest=name, default=argparse.SUPPRESS, **options)


def settings_from(args: argparse.Namespace) -> tuple[Settings, dict[str, str]]:
    """Defaults, then config.toml, then QUICKSILVER_* variables, then the flags given."""
    return load_settings({name: getattr(args, name) for name in NAMES if hasattr(args, name)})
