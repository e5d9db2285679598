"""How precisely ``Speaker.stop()`` cuts playback, on a private PulseAudio null sink.

A 440 Hz tone is played and stopped after 1.2, 2.0 and 2.4 s; the sink's monitor is
recorded. Side by side for each stop: the wall time between play() and stop(), what
stop() reports as heard, what the sink actually got, and how long stop() took.

    python -m benchmarks.speaker   (from the repository root; needs pulseaudio installed)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from quicksilver.audio.devices import Speaker

from tests.audio.test_devices import loud_spans
from tests.conftest import refresh_portaudio, running_pulse

RATE = 22050
WAITS_S = (1.2, 2.0, 2.4)


def main() -> int:
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(6 * RATE) / RATE)).astype(np.float32)
    rows = []
    with running_pulse(Path(tempfile.mkdtemp())) as server:
        refresh_portaudio()
        recording = server.recording_speaker()
        time.sleep(0.3)
        with Speaker("pulse", sample_rate=RATE) as speaker:
            speaker.play(np.zeros(RATE // 2, dtype=np.float32))  # past the stream's start-up
            speaker.wait(timeout=10)
            for wait_s in WAITS_S:
                start_s = speaker.played_s
                speaker.play(tone)
                began = time.monotonic()
                time.sleep(wait_s)
                stopping = time.monotonic()
                heard = speaker.stop() - start_s
                rows.append((stopping - began, heard, (time.monotonic() - stopping) * 1000))
                time.sleep(0.8)
        spans = loud_spans(recording.stop())
    print("| play→stop (s) | stop() reports heard (s) | sink got (s) | stop() took (ms) |")
    print("|---:|---:|---:|---:|")
    for (wall, heard, took), span in zip(rows, spans, strict=False):
        print(f"| {wall:.2f} | {heard:.2f} | {span:.2f} | {took:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
