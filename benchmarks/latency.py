"""Voice-to-voice latency of the whole conversation loop, with and without early start.

Each question is made with espeak-ng and fed to a real session (``build_session``)
as a microphone would deliver it: 32 ms frames at real-time pace, silence before and
after. The clock starts at the true end of speech in that input (the last speech
sample's due time) and stops when the first sample of the answer's audio is handed to
the output, which plays in real time like a speaker. The same questions run with
speculative start (transcription and denoising begin after 200 ms of silence) and
without it (they begin at the 500 ms endpoint), side by side in one run.

    python -m benchmarks.latency [--steps 16] [--repeats 1] [--questions 12] [--verbose]
    (from the repository root)
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import AnswerReady, Event, FinalTranscript, TurnMetrics
from quicksilver.assistant.factory import Wiring, build_session
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.vad import FRAME_SAMPLES, SAMPLE_RATE
from quicksilver.engine import Engine

from benchmarks.audio import espeak

QUESTIONS = [
    "Hello.",
    "What is seventeen times three?",
    "Thank you.",
    "What can you do?",
    "What is twelve plus nine?",
    "How do you spell apple?",
    "Which is bigger, seven or twelve?",
    "What is fifty minus eight?",
    "What day is it today?",
    "How many centimeters are in two meters?",
    "Who are you?",
    "What is forty divided by five?",
]
LEAD_S, TAIL_S = 0.5, 3.0


class PacedSource:
    """Frames of ``speech`` (with silence around it) at real-time pace, then silence.

    ``speech_end`` is the wall time (``perf_counter``) at which the last speech sample
    was due: the true end of the user's speech.
    """

    def __init__(self, speech: np.ndarray) -> None:
        lead = np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32)
        self.audio = np.concatenate([lead, speech, np.zeros(int(TAIL_S * SAMPLE_RATE))])
        self.start = time.perf_counter()
        self.speech_end = self.start + (lead.size + speech.size) / SAMPLE_RATE
        self.position = 0
        self.closed = threading.Event()

    def read(self) -> np.ndarray:
        if self.closed.is_set():
            raise AudioDeviceError("the benchmark source was closed")
        end = self.position + FRAME_SAMPLES
        delay = self.start + end / SAMPLE_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        frame = self.audio[self.position : end]
        self.position = end
        if frame.size < FRAME_SAMPLES:
            frame = np.pad(frame, (0, FRAME_SAMPLES - frame.size))
        return frame.astype(np.float32)

    def close(self) -> None:
        self.closed.set()


class ClockOutput:
    """An output that plays in real time and notes when its first sample arrived."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.first_play: float | None = None
        self._queued_s = 0.0

    def play(self, samples: np.ndarray) -> None:
        if self.first_play is None:
            self.first_play = time.perf_counter()
        self._queued_s += samples.size / self.sample_rate

    @property
    def played_s(self) -> float:
        if self.first_play is None:
            return 0.0
        return min(self._queued_s, time.perf_counter() - self.first_play)

    def wait(self, timeout: float | None = None) -> bool:
        time.sleep(max(self._queued_s - self.played_s, 0.0))
        return True

    def stop(self) -> float:
        self._queued_s = self.played_s  # the unplayed rest is dropped
        return self._queued_s

    def close(self) -> None:
        """Nothing to release: no device."""


@dataclass
class Turn:
    question: str
    heard: str
    answer: str
    voice_to_voice_ms: float
    metrics: TurnMetrics


@dataclass
class Models:
    engine: Engine
    transcriber: Transcriber
    voice: Voice
    speech: dict[str, np.ndarray] = field(default_factory=dict)


async def one_turn(models: Models, question: str, settings: Settings) -> Turn | None:
    output = ClockOutput(models.voice.sample_rate)
    source = PacedSource(models.speech[question])
    session = build_session(
        settings,
        Wiring(log=False),
        engine=models.engine,
        transcriber=models.transcriber,
        voice=models.voice,
        microphone=source,
        output=output,
    )
    events: list[Event] = []
    done = asyncio.Event()

    def collect(event: Event) -> None:
        events.append(event)
        if isinstance(event, TurnMetrics):
            done.set()

    session.subscribe(collect)
    task = asyncio.create_task(session.run())
    try:
        await asyncio.wait_for(done.wait(), timeout=LEAD_S + TAIL_S + 60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    metrics = next(e for e in events if isinstance(e, TurnMetrics))
    heard = next((e.text for e in events if isinstance(e, FinalTranscript)), "")
    answer = next((e.text for e in events if isinstance(e, AnswerReady)), "")
    if output.first_play is None:  # an empty answer: nothing to time
        return None
    v2v = (output.first_play - source.speech_end) * 1000
    return Turn(question, heard, answer, v2v, metrics)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def median(turns: list[Turn], name: str) -> str:
    values = [getattr(t.metrics, name) for t in turns if getattr(t.metrics, name) is not None]
    return f"{statistics.median(values):.0f}" if values else "–"


def report(label: str, turns: list[Turn]) -> str:
    v2v = [t.voice_to_voice_ms for t in turns]
    used = sum(t.metrics.speculative for t in turns)
    return (
        f"{label:<18}{percentile(v2v, 50):>7.0f}{percentile(v2v, 90):>7.0f}"
        f"{median(turns, 'endpoint_ms'):>10}{median(turns, 'transcript_ms'):>12}"
        f"{median(turns, 'engine_ms'):>8}{median(turns, 'first_audio_ms'):>13}"
        f"{used:>7}/{len(turns)}"
    )


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    engine = Engine.load(args.model, device="cpu")
    models = Models(engine, Transcriber(), Voice())
    questions = QUESTIONS[: args.questions]
    with tempfile.TemporaryDirectory() as folder:
        for question in questions:
            models.speech[question] = espeak(question, Path(folder))
    print(f"models and speech ready in {time.perf_counter() - started:.1f} s")
    modes = {
        "early start": Settings(steps=args.steps),
        "at the endpoint": Settings(steps=args.steps, speculative_ms=0),
    }
    await one_turn(models, questions[0], modes["early start"])  # warm-up, not counted
    results: dict[str, list[Turn]] = {label: [] for label in modes}
    for _ in range(args.repeats):
        for question in questions:
            for label, config in modes.items():  # interleaved: both see the same load
                turn = await one_turn(models, question, config)
                if turn is None:
                    print(f"  {label}: no spoken answer to {question!r}; not counted")
                    continue
                results[label].append(turn)
                if args.verbose:
                    print(
                        f"  {label:<16} {turn.voice_to_voice_ms:6.0f} ms  heard {turn.heard!r}"
                        f" → {turn.answer!r}"
                    )
    print(
        f"\nvoice-to-voice latency over {len(questions)} spoken questions x {args.repeats}, "
        f"{args.steps} denoising steps (ms; stages are medians)"
    )
    print(
        f"{'mode':<18}{'p50':>7}{'p90':>7}{'endpoint':>10}{'transcript':>12}{'engine':>8}"
        f"{'first audio':>13}{'early':>9}"
    )
    for label, turns in results.items():
        print(report(label, turns))
    fast, slow = (statistics.median(t.voice_to_voice_ms for t in results[k]) for k in modes)
    print(f"\nearly start removes {slow - fast:.0f} ms at the median ({fast / slow:.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled", help="checkpoint (default: shipped)")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1, help="passes over the questions")
    parser.add_argument(
        "--questions", type=int, default=len(QUESTIONS), help="how many of the questions to ask"
    )
    parser.add_argument("--verbose", action="store_true", help="print every turn")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
