"""Audio speed on this machine: Whisper and Piper real-time factors, endpoint-to-transcript
latency, text-to-first-audio latency.

Every figure is measured in this one run, side by side (the short encoder window against
Whisper's 30 s window on the same clips), as medians over repeats after a warm-up.

    python -m benchmarks.audio [--repeats 5]   (from the repository root; run as a file,
    this module would shadow the audio package)
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from quicksilver.audio.streaming import FinalText, StreamingTranscriber
from quicksilver.audio.stt import SttOptions, Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.vad import SAMPLE_RATE, VoiceActivity
from quicksilver.audio.wavfile import read_wav

QUESTIONS = [
    "What is seventeen times three?",
    "Set a timer for ten minutes.",
    "How far is the moon from the earth?",
    "Turn off the lights in the kitchen and lock the front door.",
]
ANSWER = "Seventeen times three is fifty-one."
LONG_ANSWER = (
    "Seventeen times three is fifty-one. To see why, take seventeen three times: ten three "
    "times is thirty, seven three times is twenty-one, and thirty plus twenty-one is fifty-one."
)
# the 5,000 characters of tests/audio/test_tts.py: the first chunk should come faster than it plays
VERY_LONG_ANSWER = (
    "The diffusion engine writes the whole answer at once, then refines it, step by step, "
    "until every word is settled; "
) * 45


def espeak(text: str, folder: Path) -> np.ndarray:
    """Speech from espeak-ng at 130 words per minute, 16 kHz, silence trimmed."""
    raw, wav = folder / "raw.wav", folder / "speech.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "130", "-w", str(raw), text], check=True)
    resample = ["sox", "-D", str(raw), "-r", "16000", "-c", "1", "-b", "16", str(wav)]
    subprocess.run(resample, check=True)  # -D: no dither, the same samples every run
    samples = read_wav(wav)
    loud = np.nonzero(np.abs(samples) > 0.01)[0]
    return samples[loud[0] : loud[-1] + 1]


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def endpoint_latency(transcriber: Transcriber, speech: np.ndarray) -> tuple[float, float, float]:
    """Feed speech + 1.5 s silence in 20 ms blocks; return (VAD end error vs truth,
    endpoint delay after true end, transcription seconds after the endpoint)."""
    stream = StreamingTranscriber(transcriber, VoiceActivity(), partial_interval_s=None)
    audio = np.concatenate([np.zeros(8000, np.float32), speech, np.zeros(24000, np.float32)])
    true_end = (8000 + speech.size) / SAMPLE_RATE
    for i in range(0, audio.size, 320):
        for event in stream.feed(audio[i : i + 320]):
            if isinstance(event, FinalText):
                return event.end_s - true_end, event.detected_s - true_end, event.transcribe_s
    raise RuntimeError("no endpoint found")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not (shutil.which("espeak-ng") and shutil.which("sox")):
        raise SystemExit("benchmarks/audio.py needs espeak-ng and sox (apt-get install ...)")
    folder = Path(tempfile.mkdtemp())
    clips = [espeak(q, folder) for q in QUESTIONS]

    print("## Whisper tiny.en (int8, CPU), per clip: seconds to transcribe, real-time factor")
    short = Transcriber()
    full = Transcriber(options=SttOptions(short_window=False))
    full.transcribe(clips[0])
    print(f"{'clip':>6} {'audio s':>8} {'short win':>10} {'30 s win':>9} {'speed-up':>9}  text")
    ratios = []
    for clip in clips:
        seconds = clip.size / SAMPLE_RATE
        a = median_time(lambda c=clip: short.transcribe(c, speech_checked=True), args.repeats)
        b = median_time(lambda c=clip: full.transcribe(c, speech_checked=True), args.repeats)
        ratios.append(b / a)
        text = short.transcribe(clip, speech_checked=True)
        print(f"{clip.size:>6} {seconds:8.2f} {a:7.3f} s {b:6.3f} s {b / a:8.1f}x  {text}")
        print(f"{'':>6} {'RTF':>8} {a / seconds:9.3f} {b / seconds:9.3f}")
    print(f"median speed-up of the short window: {statistics.median(ratios):.1f}x\n")

    print("## Speech end (true, from the file) to final transcript, streaming in 20 ms blocks")
    print(f"{'audio s':>8} {'VAD end err':>12} {'endpoint':>9} {'transcribe':>11} {'total':>7}")
    for clip in clips:
        rows = [endpoint_latency(short, clip) for _ in range(args.repeats)]
        err, delay, stt = (statistics.median(column) for column in zip(*rows, strict=True))
        print(f"{clip.size / SAMPLE_RATE:8.2f} {err * 1000:9.0f} ms {delay * 1000:6.0f} ms "
              f"{stt * 1000:8.0f} ms {(delay + stt) * 1000:4.0f} ms")  # fmt: skip
    print("(endpoint = VAD hang-over 500 ms + detection lag; target: transcribe <= 400 ms)\n")

    print("## Piper en_US-joe-medium (CPU): first chunk and real-time factor")
    voice = Voice()
    for label, text in (("one sentence", ANSWER), ("three sentences", LONG_ANSWER)):
        firsts, totals, audio_s = [], [], 0.0
        for _ in range(args.repeats):
            start = time.perf_counter()
            chunks = voice.synthesize(text)
            first = next(chunks)
            firsts.append(time.perf_counter() - start)
            audio_s = first.duration_s + sum(c.duration_s for c in chunks)
            totals.append(time.perf_counter() - start)
        first_ms = statistics.median(firsts) * 1000
        total = statistics.median(totals)
        print(f"{label:>16}: first chunk {first_ms:5.0f} ms, all {total:.2f} s for "
              f"{audio_s:.2f} s of audio, RTF {total / audio_s:.3f}")  # fmt: skip
    firsts = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        first = next(voice.synthesize(VERY_LONG_ANSWER))
        firsts.append(time.perf_counter() - start)
    first_s = statistics.median(firsts)
    print(f"{len(VERY_LONG_ANSWER):,} characters: first chunk {first_s * 1000:5.0f} ms for "
          f"{first.duration_s:.2f} s of audio, RTF {first_s / first.duration_s:.3f}")  # fmt: skip
    print("(targets: first chunk <= 150 ms for a one-sentence answer; for 5,000 characters,"
          " RTF < 1)")  # fmt: skip


if __name__ == "__main__":
    main()
