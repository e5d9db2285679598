"""Live transcription: voice activity + Whisper re-run on the growing utterance.

While the user speaks, the utterance so far is re-transcribed every ``partial_interval_s``
of audio for partial text; at the endpoint the whole utterance is transcribed once more
for the final text. Partials are skipped while the speaker pauses, so that no partial is
still running when the endpoint arrives and the final starts at once.

Everything runs in the caller's thread (feed it from the audio worker); a partial that
takes longer than real time only delays the next frames, which the VAD then catches up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.vad import SAMPLE_RATE, SpeechEnd, SpeechStart, VoiceActivity


@dataclass(frozen=True)
class PartialText:
    """Provisional text of the open utterance; ``stable`` is the prefix that two
    consecutive partials agreed on (it rarely changes later)."""

    text: str
    stable: str
    audio_s: float  # utterance length it was computed from
    transcribe_s: float


@dataclass(frozen=True)
class FinalText:
    """The transcript of a finished utterance (empty when Whisper found no words)."""

    text: str
    start_s: float
    end_s: float
    detected_s: float  # stream time at which the endpoint was detected
    transcribe_s: float  # wall seconds from endpoint to this text
    truncated: bool
    audio: np.ndarray


StreamEvent = SpeechStart | PartialText | FinalText


class PartialSchedule:
    """When the open utterance is due for another partial transcript: after every
    ``interval_s`` of stream time, once it is ``min_audio_s`` long, never in a pause (so
    no partial is still running when the endpoint arrives). ``interval_s=None``: never.
    """

    def __init__(self, interval_s: float | None = 0.5, min_audio_s: float = 0.6) -> None:
        if interval_s is not None and interval_s <= 0:
            raise ValueError("partial_interval_s must be positive (or None for no partials)")
        self.interval_s = interval_s
        self.min_audio_s = min_audio_s
        self._last = 0.0

    def restart(self, vad: VoiceActivity) -> None:
        """An utterance began (or the stream started afresh): count from now."""
        self._last = vad.time_s

    def due(self, vad: VoiceActivity) -> np.ndarray | None:
        """The utterance so far, if a partial of it is due now (and counted as given)."""
        if self.interval_s is None or not vad.in_speech or vad.in_pause:
            return None
        if vad.time_s - self._last < self.interval_s:
            return None
        audio = vad.utterance_audio()
        if audio.size < self.min_audio_s * SAMPLE_RATE:
            return None
        self._last = vad.time_s
        return audio


def _common_prefix(a: str, b: str) -> str:
    words = []
    for x, y in zip(a.split(), b.split(), strict=False):
        if x != y:
            break
        words.append(x)
    return " ".join(words)


class StreamingTranscriber:
    """Feed 16 kHz audio blocks; get speech starts, partial texts and final texts."""

    def __init__(
        self,
        transcriber: Transcriber,
        vad: VoiceActivity | None = None,
        *,
        partial_interval_s: float | None = 0.5,
        min_partial_audio_s: float = 0.6,
    ) -> None:
        self.transcriber = transcriber
        self.vad = vad or VoiceActivity()
        self.partials = PartialSchedule(partial_interval_s, min_partial_audio_s)
        self._previous_partial = ""

    def reset(self) -> None:
        """Drop any open utterance (e.g. the assistant started speaking)."""
        self.vad.reset()
        self._previous_partial = ""

    def feed(self, samples: np.ndarray) -> list[StreamEvent]:
        """Process the next block; return what it completed, in order."""
        events: list[StreamEvent] = []
        for event in self.vad.process(samples):
            if isinstance(event, SpeechStart):
                self.partials.restart(self.vad)
                self._previous_partial = ""
                events.append(event)
            else:
                events.append(self._final(event))
        partial = self._maybe_partial()
        if partial is not None:
            events.append(partial)
        return events

    def flush(self) -> list[StreamEvent]:
        """End of input: finish an open utterance."""
        return [self._final(event) for event in self.vad.flush() if isinstance(event, SpeechEnd)]

    def _final(self, end: SpeechEnd) -> FinalText:
        start = time.perf_counter()
        text = self.transcriber.transcribe(end.audio, speech_checked=True)
        self._previous_partial = ""
        return FinalText(
            text=text,
            start_s=end.start_s,
            end_s=end.end_s,
            detected_s=end.detected_s,
            transcribe_s=time.perf_counter() - start,
            truncated=end.truncated,
            audio=end.audio,
        )

    def _maybe_partial(self) -> PartialText | None:
        audio = self.partials.due(self.vad)
        if audio is None:
            return None
        start = time.perf_counter()
        text = self.transcriber.transcribe(audio, speech_checked=True)
        stable = _common_prefix(self._previous_partial, text)
        self._previous_partial = text
        return PartialText(text, stable, audio.size / SAMPLE_RATE, time.perf_counter() - start)
