"""Has the speaker finished? Semantic end-of-turn from the audio and from the words.

A fixed hang-over of silence is a poor judge of a turn: it cuts "what is seventeen …
times three" at the pause, and it makes a finished "what is seventeen times three?"
wait out the whole hang-over before the answer plays. Two cheap judges do better:

* :class:`SmartTurn` hears it: pipecat's Smart Turn v3.2, an 8.7 MB ONNX model made to
  tell from the last 8 s of audio (prosody, the shape of the last words) whether a turn
  is complete, in a few tens of ms on one CPU thread. It ships in the ``pipecat-ai``
  wheel (BSD-2), which is found without importing pipecat itself. It was trained on
  human speech; synthetic voices end every phrase with a falling tone and sound
  finished to it.
* :func:`unfinished` reads it: a transcript that stops on an operator, a conjunction,
  an article or a preposition ("what is seventeen times …", "fifteen or …", "two
  hundred and …"), that names a word or letter without saying it ("spell the word
  …"), or a calculation with one number and nothing to do to it ("what is seventeen
  …"), is not a whole question, whatever the voice sounded like. Whisper's own
  punctuation is no judge: it closes "Which is bigger?" at the comma pause of "which
  is bigger, seven or twelve".

The session combines them (see ``assistant/session.py``).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np
from quicksilver.audio.textnorm import ONES, TENS
from quicksilver.audio.vad import SAMPLE_RATE

SMART_TURN_FILE = "smart-turn-v3.2-cpu.onnx"
WINDOW_S = 8  # the model hears the last 8 s, left-padded with silence
_DANGLING = frozenset(
    """
    and or but nor plus minus times divided multiplied over than of the a an to in on at
    from for with by into between is are what which how whats many much my your if
    because um uh er
    """.split()
)
_TRAILING_MARK = re.compile(r"(,|;|:|-|…|\.\.\.)\s*$")
_WORD = re.compile(r"[a-z']+|\d[\d,.]*")
_NUMBER_WORDS = frozenset(ONES + TENS[2:] + ["hundred", "thousand", "million", "and"])
_CALCULATION_OPENERS = ("whats", "what is", "how much is", "calculate", "compute", "work out")
_AWAITING_ITEM = ("the word", "the letter", "the number", "the letters", "spell", "spelled")
_COMPARISON = re.compile(
    r"\bwhich (?:\w+ )?(?:is|are) (?:the )?(?:bigger|larger|smaller|greater|higher|lower|"
    r"longer|shorter|more|less|biggest|largest|smallest)\b"
)


def unfinished(transcript: str) -> bool:
    """True when ``transcript`` breaks off mid-phrase: it ends on a word that needs
    another after it, or on a comma, dash or ellipsis; it names a word or letter and
    stops ("spell the word …"); it asks which is bigger and has not said of what; or it
    opens a calculation and gives one number with nothing to do to it ("what is
    seventeen …"). An empty one is unfinished too."""
    text = transcript.strip().lower()
    if not text or _TRAILING_MARK.search(text):
        return True
    words = _WORD.findall(text.replace("what's", "whats"))
    if not words or words[-1] in _DANGLING:
        return True
    phrase = " ".join(words)
    if phrase.endswith(_AWAITING_ITEM):
        return True
    if _COMPARISON.search(phrase) and not re.search(r"\b(or|than)\b", phrase):
        return True  # "which is bigger …" has not said of what yet
    for opener in _CALCULATION_OPENERS:
        if phrase.startswith(opener + " "):
            rest = phrase[len(opener) + 1 :].split()
            return all(word[0].isdigit() or word in _NUMBER_WORDS for word in rest)
    return False


def bundled_model_path() -> Path | None:
    """Smart Turn v3.2 as the ``pipecat-ai`` package installs it, if it is installed."""
    spec = importlib.util.find_spec("pipecat")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder, "audio", "turn", "smart_turn", "data", SMART_TURN_FILE)
        if path.is_file():
            return path
    return None


class SmartTurn:
    """P(the turn is complete) for the audio heard so far, from Smart Turn v3.2.

    ``model``: an ONNX file of the same kind, or ``None`` for the one in ``pipecat-ai``.
    ``threads``: onnxruntime's intra-op threads (one is plenty for 8 s of audio).
    """

    def __init__(self, model: str | Path | None = None, threads: int = 1) -> None:
        import onnxruntime
        from faster_whisper.feature_extractor import FeatureExtractor

        path = Path(model) if model is not None else bundled_model_path()
        if path is None:
            raise FileNotFoundError(
                "the Smart Turn model comes with the pipecat-ai package: pip install pipecat-ai"
                " (or turn semantic turn detection off: semantic_turns = false)"
            )
        if not path.is_file():
            raise FileNotFoundError(f"no Smart Turn model at {path}")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._features = FeatureExtractor(
            feature_size=80, sampling_rate=SAMPLE_RATE, hop_length=160, chunk_length=WINDOW_S
        )
        self.path = path

    def features(self, samples: np.ndarray) -> np.ndarray:
        """The model's input for ``samples``: Whisper's 80 log-mel bands over the last
        8 s (left-padded with silence), the waveform normalised first as in training."""
        window = WINDOW_S * SAMPLE_RATE
        audio = np.asarray(samples, dtype=np.float32).reshape(-1)[-window:]
        audio = np.pad(audio, (window - audio.size, 0))
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
        return self._features(audio, padding=0)[:, : window // 160].astype(np.float32)

    def probability(self, samples: np.ndarray) -> float:
        """How sure the model is that the speaker has finished, from ``samples`` (16 kHz
        mono float32, the utterance so far including the silence after it)."""
        (output,) = self._session.run(None, {"input_features": self.features(samples)[None]})
        return float(np.asarray(output).reshape(-1)[0])
