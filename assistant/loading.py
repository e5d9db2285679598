"""Loading the models a conversation needs, with one clear message when one cannot load.

A missing checkpoint file, Whisper model, Piper voice or Python package should stop the
start-up with a sentence that names it and says what to do, not a traceback from deep
inside PyTorch or onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import TypeVar

import torch
from quicksilver.assistant.config import Settings, thread_budget, voice_thread_budget
from quicksilver.audio.language_model import FILE_NAME, QuestionModel
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.turn import SmartTurn
from quicksilver.engine import Engine
from quicksilver.engine.checkpoints import resolve_checkpoint
from quicksilver.engine.hub import HUB_ID

T = TypeVar("T")
WHISPER_MODELS = "quicksilver.whisper_models"  # entry points: Whisper models shipped by name

# import name -> what to pip install
PACKAGES = {
    "torch": "torch",
    "tokenizers": "tokenizers",
    "safetensors": "safetensors",
    "faster_whisper": "faster-whisper",
    "ctranslate2": "faster-whisper",
    "onnxruntime": "onnxruntime",
    "piper": "piper-tts",
    "sounddevice": "sounddevice",
    "pipecat": "pipecat-ai",
}


class StartupError(RuntimeError):
    """Something a session needs could not be had; one line. ``component`` names it
    (``engine``, ``whisper``, ``voice``, ``turn``, ``microphone``, ``speaker``, ``output``), so a
    face can add its own way out (a flag, a menu)."""

    def __init__(self, component: str, message: str) -> None:
        super().__init__(message)
        self.component = component


def _load(component: str, what: str, load: Callable[[], T]) -> T:
    try:
        return load()
    except ModuleNotFoundError as error:
        name = (error.name or "").split(".")[0]
        package = PACKAGES.get(name, name)
        raise StartupError(
            component,
            f"cannot load {what}: the Python package {package!r} is missing; "
            f"install it with `pip install {package}`",
        ) from error
    except (FileNotFoundError, ValueError, OSError) as error:
        raise StartupError(component, f"cannot load {what}: {error}") from error


def load_engine(model: str, device: str = "auto", threads: int = 0) -> Engine:
    """The engine; torch's threads (process-wide) set to the budget (``thread_budget``)."""
    torch.set_num_threads(thread_budget(threads))
    return _load("engine", f"the model {model!r}", lambda: Engine.load(model, device=device))


def resolve_whisper_model(model: str) -> str:
    """A Whisper model as :class:`Transcriber` takes it. A name registered in the
    ``quicksilver.whisper_models`` entry points (a fine-tune a package ships, such as
    ``tiny.en-quicksilver``) becomes its folder; a faster-whisper name or a folder passes."""
    registered = {ep.name: ep for ep in entry_points(group=WHISPER_MODELS)}
    if model in registered and not Path(model).expanduser().exists():
        return str(registered[model].load()())
    return model


def load_transcriber(
    model: str, threads: int = 0, questions: QuestionModel | None = None
) -> Transcriber:
    """Whisper; ``questions`` (:func:`load_question_model`) chooses among its hypotheses."""
    budget = thread_budget(threads)

    def load() -> Transcriber:
        return Transcriber(resolve_whisper_model(model), cpu_threads=budget, questions=questions)

    return _load("whisper", f"the Whisper model {model!r}", load)


def load_transcriber_for(settings: Settings) -> Transcriber:
    """Whisper as ``settings`` ask: its model and thread budget and, unless
    ``question_model`` is off, the engine's question model to choose among hypotheses."""
    questions = load_question_model(settings.model) if settings.question_model else None
    return load_transcriber(settings.whisper_model, settings.threads, questions)


def load_question_model(engine_model: str) -> QuestionModel | None:
    """The model of what users ask that the engine's checkpoint folder ships
    (``questions.lm.json``, see :mod:`audio.language_model`), if it has one: a folder or a
    registered name. A hub model ships none, and is not looked up again."""
    if HUB_ID.fullmatch(engine_model) and not Path(engine_model).expanduser().exists():
        return None
    try:
        path = resolve_checkpoint(engine_model) / FILE_NAME
    except FileNotFoundError:
        return None  # load_engine names the missing checkpoint
    if not path.is_file():
        return None
    return _load("whisper", f"the question model {path}", lambda: QuestionModel.load(path))


def load_voice(voice: str, threads: int = 0) -> Voice:
    """The Piper voice, with its own thread budget (``voice_thread_budget``)."""
    budget = voice_thread_budget(threads)
    return _load("voice", f"the Piper voice {voice!r}", lambda: Voice(voice, threads=budget))


def load_turn_model(threads: int = 0) -> SmartTurn:
    """Smart Turn, the model that hears whether a pause ends the question."""
    budget = thread_budget(threads)
    return _load("turn", "the Smart Turn model", lambda: SmartTurn(threads=budget))
