"""The assistant's settings and where each one came from.

Four layers, each overriding the one before: the defaults below, the user's
``config.toml`` (under ``$XDG_CONFIG_HOME/quicksilver``, else ``~/.config/quicksilver``),
environment variables ``QUICKSILVER_<NAME>`` and command-line flags. ``load_settings``
also says which layer set every value, so ``quicksilver config`` can answer "why is
this set?" and every bad value is reported with the file or variable that holds it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import sys
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from quicksilver.assistant.listener import ListenConfig
from quicksilver.audio.tts import DEFAULT_VOICE, VOICES_VARIABLE
from quicksilver.audio.vad import VadConfig

# tiny.en with its decoder fine-tuned on spoken questions (models/whisper_quicksilver),
# registered by name and built from the bundled tiny.en on first use: 68% -> 90% of
# spoken questions intact on the validation draw (BENCHMARKS.md). "tiny.en" is the plain one.
DEFAULT_WHISPER_MODEL = "tiny.en-quicksilver"

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the tomli backport, a dependency there
    import tomli as tomllib

ENV_PREFIX = "QUICKSILVER_"
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


@dataclass(frozen=True)
class Settings:
    """Everything the assistant can be told; the defaults work offline on a laptop.

    Each default is written once: here, or (for a part usable alone) by that part and
    read from it. ``steps``: ``None`` means the model's own default (its checkpoint
    says how many steps it was tuned for). ``input_device``/``output_device``: an index
    or part of a device name, ``None`` for the system's default. ``speculative_ms``:
    silence after which transcription and denoising start before the endpoint (0: off).
    ``headset``: ``False`` gates the microphone while the assistant speaks through
    loudspeakers, ``True`` allows full barge-in. ``context_tokens``: prompt budget for
    the whole prompt (date, earlier turns, question). ``log_path``: ``None`` for
    ``$XDG_DATA_HOME/quicksilver/history.jsonl``. ``booth_reset_s``: in booth mode, the
    idle seconds after which the conversation starts afresh for the next visitor.
    ``instructions``: text added to the system message the model reads before the
    conversation (after the date sentence, for models told the date); a model not
    trained to follow instructions (the shipped one) may not heed it.
    ``semantic_turns``: judge the end of a spoken question by its sound (Smart Turn) and
    its words, not by silence alone: one that breaks off ("… times") waits up to
    ``max_pause_ms`` of silence for the rest; one that reads whole ends after
    ``whole_pause_ms`` of silence (when that is shorter than ``hangover_ms``), or as
    soon as its answer is ready to be spoken if it then sounds finished.
    ``voice_ahead``: synthesise the spoken answer's first piece as soon as the
    denoising has settled it (its tokens are committed, usually a third of the way
    through the steps), beside the remaining steps, instead of after the last one; it is
    still said only once the answer is final (and sure enough to say).
    ``threads``: the CPU threads each of Whisper, Piper and the engine may use (0: half
    the cores, at least one, and every core for Piper; see :func:`thread_budget`).
    ``question_model``: let the model of what users ask that the engine's checkpoint
    ships (``questions.lm.json``) choose among Whisper's hypotheses; off, Whisper's own
    first choice stands (for questions far from the model's skills).
    ``unsure_below``: an answer whose confidence (``Answer.confidence``, 0 to 1) is
    below this is not said; the assistant says it is not sure instead. ``None``: the
    model's own threshold, measured on validation items (the shipped model's is in its card;
    none, so never unsure, for a model without one); 0 turns it off.
    """

    model: str = "bundled"
    steps: int | None = field(default=None, metadata={"minimum": 1})
    device: str = "auto"
    whisper_model: str = DEFAULT_WHISPER_MODEL
    voice: str = DEFAULT_VOICE
    input_device: str | None = None
    output_device: str | None = None
    hangover_ms: int = field(default=VadConfig.hangover_ms, metadata={"minimum": 0})
    speculative_ms: int = field(default=ListenConfig.speculative_ms, metadata={"minimum": 0})
    headset: bool = False
    context_tokens: int = field(default=192, metadata={"minimum": 1})
    max_turns: int = field(default=8, metadata={"minimum": 0})
    log_path: Path | None = None
    show_thinking: bool = False
    booth_reset_s: int = field(default=60, metadata={"minimum": 1})
    instructions: str | None = None
    semantic_turns: bool = True
    voice_ahead: bool = True
    max_pause_ms: int = field(default=1500, metadata={"minimum": 0})
    whole_pause_ms: int = field(default=400, metadata={"minimum": 0})
    threads: int = field(default=0, metadata={"minimum": 0})
    question_model: bool = True
    unsure_below: float | None = field(default=None, metadata={"minimum": 0, "maximum": 1})


# Settings a running session takes on; the others choose what it was built from.
LIVE_SETTINGS = frozenset(
    {"steps", "headset", "hangover_ms", "speculative_ms", "context_tokens", "max_turns",
     "show_thinking", "booth_reset_s", "instructions", "max_pause_ms", "whole_pause_ms",
     "unsure_below", "voice_ahead"}
)  # fmt: skip


def thread_budget(threads: int = 0) -> int:
    """CPU threads for each of Whisper, Piper and the engine: ``threads``, or for 0 half the
    cores this process may use. Each library alone takes a thread per core; in one process,
    with speculation overlapping the stages and any other program running, they preempt one
    another (an answer took 4-15 s instead of 0.3 s on 2 busy cores), so each gets a share.
    The cores are those :func:`quicksilver.engine.machine.usable_cores` counts, not the
    host's: a container limited to 2 CPUs on a 64-core host gets 1 thread each, not 32."""
    return threads or max(1, _usable_cores() // 2)


def voice_thread_budget(threads: int = 0) -> int:
    """CPU threads for Piper: ``threads``, or for 0 every core this process may use. Piper
    mostly speaks once Whisper and the engine are done with the question (its first piece
    may overlap the last denoising steps), and its idle workers sleep rather than spin, so
    it can take the whole CPU: its first sentence came 30% sooner on 2 cores
    (BENCHMARKS.md, "Assistant: voice-to-voice latency")."""
    return threads or _usable_cores()


def _usable_cores() -> int:
    """:func:`quicksilver.engine.machine.usable_cores`, imported only when a budget is
    worked out: the engine package loads torch, which settings alone never need."""
    from quicksilver.engine.machine import usable_cores

    return usable_cores()


FIELD_TYPES: dict[str, Any] = typing.get_type_hints(Settings)
NAMES: tuple[str, ...] = tuple(f.name for f in fields(Settings))
MINIMUMS: dict[str, int] = {f.name: f.metadata["minimum"] for f in fields(Settings) if f.metadata}
MAXIMUMS: dict[str, int] = {
    f.name: f.metadata["maximum"] for f in fields(Settings) if "maximum" in f.metadata
}


def xdg_dir(env: Mapping[str, str], variable: str, fallback: str) -> Path:
    """An XDG base directory: the variable when it holds an absolute path, else ~/fallback."""
    value = env.get(variable, "")
    if value and Path(value).is_absolute():
        return Path(value)
    return Path(env.get("HOME") or Path.home()) / fallback


def default_config_path(env: Mapping[str, str] = os.environ) -> Path:
    return xdg_dir(env, "XDG_CONFIG_HOME", ".config") / "quicksilver" / "config.toml"


def load_settings(
    cli_overrides: Mapping[str, Any],
    env: Mapping[str, str] = os.environ,
    config_path: str | Path | None = None,
) -> tuple[Settings, dict[str, str]]:
    """The effective settings and, for each name, the layer that set it.

    ``cli_overrides`` maps setting names to the flags that were given (leave out the
    others: a flag's value of ``None`` is a value, for a setting that can be unset).
    A missing default config file is fine; a missing ``config_path`` given explicitly is
    an error. Bad values raise ``ValueError`` naming the file or variable, the setting
    and what it expects.
    """
    values: dict[str, Any] = {}
    sources = dict.fromkeys(NAMES, "default")
    path = Path(config_path) if config_path is not None else default_config_path(env)
    if config_path is not None or path.is_file():
        where = f"config file {path}"
        for name, value in _read_toml(path).items():
            if name not in FIELD_TYPES:
                raise ValueError(f"{where}: {_unknown(name)}")
            values[name] = _convert(name, value, where, relative_to=path.parent)
            sources[name] = where
    for variable, text in sorted(env.items()):
        if not variable.startswith(ENV_PREFIX) or variable == VOICES_VARIABLE:
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        where = f"environment {variable}"
        if name not in FIELD_TYPES:
            raise ValueError(f"{where}: {_unknown(name)} (as QUICKSILVER_<NAME>)")
        values[name] = _convert(name, text, where)
        sources[name] = where
    for name, value in cli_overrides.items():
        if name not in FIELD_TYPES:
            raise ValueError(f"command line: {_unknown(name)}")
        values[name] = _convert(name, value, "command line")
        sources[name] = "command line"
    return Settings(**values), sources


def changed_settings(settings: Settings, changes: Mapping[str, Any]) -> Settings:
    """``settings`` with ``changes`` applied, each checked as a flag's value would be."""
    checked = {}
    for name, value in changes.items():
        if name not in FIELD_TYPES:
            raise ValueError(_unknown(name))
        checked[name] = _convert(name, value, "update")
    return dataclasses.replace(settings, **checked)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as file:
            return tomllib.load(file)
    except FileNotFoundError:
        raise ValueError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(
            f"config file {path} is not valid TOML ({error}); "
            'write one setting per line, e.g. steps = 16 or voice = "en_US-joe-medium"'
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"config file {path} cannot be read: {error}") from None


def _unknown(name: str) -> str:
    close = difflib.get_close_matches(name, NAMES, n=1)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return f"unknown setting {name!r}; {guess}known settings: {', '.join(NAMES)}"


def _convert(name: str, value: Any, where: str, relative_to: Path | None = None) -> Any:
    """``value`` (text from the environment, or a TOML/flag value) as the field's type."""
    kind = FIELD_TYPES[name]
    optional = type(None) in typing.get_args(kind)
    if optional:
        kind = next(t for t in typing.get_args(kind) if t is not type(None))
    text = value.strip() if isinstance(value, str) else None
    converted: Any = None
    if optional and (value is None or text == ""):
        return None
    if kind is bool:
        if isinstance(value, bool):
            converted = value
        elif text is not None and text.lower() in TRUE_WORDS + FALSE_WORDS:
            converted = text.lower() in TRUE_WORDS
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            converted = value
        elif text is not None and text.lstrip("+-").isdigit():
            converted = int(text)
    elif kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            converted = float(value)
        elif text is not None:
            try:
                converted = float(text)
            except ValueError:
                converted = None
        if converted is not None and not math.isfinite(converted):
            converted = None
    elif kind is str:
        if isinstance(value, str):
            converted = value
        elif isinstance(value, int) and not isinstance(value, bool):
            converted = str(value)  # a device index written as a number
    elif kind is Path and (isinstance(value, os.PathLike) or text):
        converted = Path(value).expanduser()
        if relative_to is not None and not converted.is_absolute():
            converted = relative_to / converted
    minimum, maximum = MINIMUMS.get(name), MAXIMUMS.get(name)
    if (
        converted is None
        or (minimum is not None and converted < minimum)
        or (maximum is not None and converted > maximum)
    ):
        expected = _expected(kind, minimum, maximum)
        expected += ' (or "" for the default)' if optional else ""
        raise ValueError(f"{where}: {name} must be {expected}, got {value!r}")
    return converted


def _expected(kind: Any, minimum: int | None, maximum: int | None = None) -> str:
    if kind is bool:
        return "true or false (also yes/no, on/off, 1/0)"
    if kind is float:
        bounds = f" from {minimum} to {maximum}" if None not in (minimum, maximum) else ""
        return "a number" + bounds
    if kind is int:
        return "a whole number" + (f" of at least {minimum}" if minimum is not None else "")
    if kind is Path:
        return "a file path"
    return "text"
