"""One whole voice turn from a file: voice activity, Whisper, the engine, Piper.

The same stages as a live conversation, run one after the other on a recorded question,
so a turn can be checked, timed and scripted without a microphone:
``quicksilver converse --input question.wav --output answer.wav --json``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from quicksilver.assistant.memory import Memory
from quicksilver.assistant.session import engine_memory, spoken_answer
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.vad import SpeechEnd, VadConfig, VoiceActivity
from quicksilver.audio.wavfile import write_wav
from quicksilver.engine import Engine


@dataclass(frozen=True)
class StageTimes:
    """Milliseconds per stage; ``first_audio_ms`` is the first sentence's synthesis."""

    vad_ms: float
    transcript_ms: float
    engine_ms: float
    first_audio_ms: float | None
    speech_ms: float
    total_ms: float


@dataclass(frozen=True)
class ConverseResult:
    transcript: str
    answer: str
    thinking: str
    steps: int
    timings: StageTimes
    speech_s: float  # length of the question's speech
    answer_audio: np.ndarray  # the spoken answer at ``sample_rate`` (empty if silent)
    sample_rate: int
    output: Path | None  # where the spoken answer was written

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (without the audio samples)."""
        return {
            "transcript": self.transcript,
            "answer": self.answer,
            "thinking": self.thinking,
            "steps": self.steps,
            "timings_ms": asdict(self.timings),
            "speech_s": round(self.speech_s, 3),
            "answer_s": round(self.answer_audio.size / self.sample_rate, 3),
            "output": str(self.output) if self.output else None,
        }


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


def find_speech(samples: np.ndarray, config: VadConfig | None = None) -> list[SpeechEnd]:
    """The utterances in a whole recording."""
    vad = VoiceActivity(config)
    return [e for e in vad.process(samples) + vad.flush() if isinstance(e, SpeechEnd)]


def converse(
    samples: np.ndarray,
    engine: Engine,
    transcriber: Transcriber,
    voice: Voice,
    *,
    output: str | Path | None = None,
    steps: int | None = None,
    memory: Memory | None = None,
    today: Callable[[], date] = date.today,
    vad: VadConfig | None = None,
) -> ConverseResult:
    """Answer the question spoken in ``samples`` (16 kHz mono) and speak the answer.

    All utterances in the recording make up the question. Raises ``ValueError`` when
    there is no speech or Whisper hears no words in it.
    """
    started = time.perf_counter()
    utterances = find_speech(samples, vad)
    vad_ms = _ms(started)
    if not utterances:
        raise ValueError("no speech found in the recording: record the question again, louder")
    audio = np.concatenate([u.audio for u in utterances])

    mark = time.perf_counter()
    transcript = transcriber.transcribe(audio, speech_checked=True).strip()
    transcript_ms = _ms(mark)
    if not transcript:
        raise ValueError("Whisper heard no words in the recording: say the question clearly")

    memory = memory or engine_memory(engine)
    answer = spoken_answer(engine.answer(memory.messages(transcript, today()), steps=steps))

    mark = time.perf_counter()
    first_audio_ms = None
    pieces = []
    for chunk in voice.synthesize(answer.text):
        first_audio_ms = first_audio_ms if pieces else _ms(mark)
        pieces.append(chunk.samples)
    speech = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    speech_ms = _ms(mark)
    if output is not None:
        write_wav(output, speech, voice.sample_rate)
    return ConverseResult(
        transcript=transcript,
        answer=answer.text,
        thinking=answer.thinking,
        steps=answer.steps,
        timings=StageTimes(
            vad_ms=vad_ms,
            transcript_ms=transcript_ms,
            engine_ms=round(answer.latency_s * 1000, 1),
            first_audio_ms=first_audio_ms,
            speech_ms=speech_ms,
            total_ms=_ms(started),
        ),
        speech_s=sum(u.end_s - u.start_s for u in utterances),
        answer_audio=speech,
        sample_rate=voice.sample_rate,
        output=Path(output) if output is not None else None,
    )
