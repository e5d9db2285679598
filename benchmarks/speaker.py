"""How precisely ``Speaker.stop()`` cuts playback, on a private PulseAudio null sink.

A 440 Hz tone is played and stopped after 1.2, 2.0 and 2.4 s; the sink's monitor is
recorded. Side by side for each stop: the wall time between play() and stop(), what
stop() reports as heard, what the sink actually got, and how long stop() took.

The two timing bounds ``tests/audio/test_devices.py`` used to assert are checked here,
since they hold on an idle machine but not under any load: the sink got at least 60 ms
less than the wall time (the device buffer was dropped, not played out), and within
80 ms of what stop() reports.

    python -m benchmarks.speaker   (from the repository root; needs pulseaudio installed)
"""

from __future__ import annotations

import time

import numpy as np
from quicksilver.audio.devices import Speaker

from benchmarks.pulse import loud_spans, running_pulse

RATE = 22050
WAITS_S = (1.2, 2.0, 2.4)
DROPPED_S = 0.06  # the sink gets at least this much less than the wall time
REPORT_ERROR_S = 0.08  # and this close to what stop() reports


def main() -> int:
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(6 * RATE) / RATE)).astype(np.float32)
    rows = []
    with running_pulse() as server:
        recording = server.recording_speaker()
        time.sleep(0.3)
        with Speaker("pulse", sample_rate=RATE) as speaker:
            speaker.play(np.zeros(RATE // 2, dtype=np.float32))  # past the stream's start-up
            speaker.wait(timeout=10)
            for wait_s in WAITS_S:
                start_s = speaker.played_s
                began = time.monotonic()
                speaker.play(tone)
                time.sleep(wait_s)
                stopping = time.monotonic()
                heard = speaker.stop() - start_s
                rows.append((stopping - began, heard, (time.monotonic() - stopping) * 1000))
                time.sleep(0.8)
        spans = loud_spans(recording.stop())
    if len(spans) != len(rows):
        print(f"expected {len(rows)} stretches of sound on the sink, got {spans}")
        return 1
    print("| play→stop (s) | stop() reports heard (s) | sink got (s) | stop() took (ms) "
          "| wall − sink (s) | sink − reported (s) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    within = True
    for (wall, heard, took), span in zip(rows, spans, strict=True):
        print(f"| {wall:.2f} | {heard:.2f} | {span:.2f} | {took:.0f} | {wall - span:+.2f} "
              f"| {span - heard:+.2f} |")  # fmt: skip
        within &= wall - span >= DROPPED_S and abs(span - heard) <= REPORT_ERROR_S
    print(f"\nsink ≤ wall − {DROPPED_S} s and |sink − reported| ≤ {REPORT_ERROR_S} s for every "
          f"stop: {'yes' if within else 'NO'}")  # fmt: skip
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
