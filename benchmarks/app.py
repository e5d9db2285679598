"""The terminal app's cost beside the engine's: first paint, and one denoising frame.

    python -m benchmarks.app [--frames 160]   (from the repository root)

First paint: a fresh process imports the app and paints its screen (headless, the
session's build held back so no model loads), timed from the process's start. Frames:
the canvas draws drafts of the shipped model's real answer (the draw, then the screen
refresh). Then the shipped model answers with the app idle and with the canvas
animating all along, side by side in one run: the ratio says whether drawing holds up
the engine (it runs in its own thread; the drawing on the app's loop).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time

CHILD = """
import threading, time
from quicksilver.assistant.config import Settings
from quicksilver.assistant.wiring import Wiring
from quicksilver.ui.app import QuicksilverApp

held = threading.Event()

def build(*args, **kwargs):  # the session never comes: first paint only
    from quicksilver.assistant.loading import StartupError  # (imports torch: not before)

    held.wait()
    raise StartupError("engine", "not in this benchmark")

class Timed(QuicksilverApp):
    def on_mount(self):
        super().on_mount()
        self.call_after_refresh(self.painted)

    def painted(self):
        print(time.time(), flush=True)
        held.set()
        self.set_timer(0.3, self.exit)  # after the start-up failure is drawn

Timed(Settings(), Wiring(microphone=False, output="none"), build=build).run(
    headless=True, size=(100, 30)
)
"""


def first_paint_s() -> float:
    started = time.time()
    printed = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    return float(printed.split()[0]) - started


async def drawing_against_denoising(answers: int) -> dict[str, list[float]]:
    """Milliseconds per canvas frame (drawing a draft, and the screen refresh after it),
    and per engine answer with the app idle and with it animating every frame."""
    from quicksilver.assistant.config import Settings
    from quicksilver.assistant.events import Denoise
    from quicksilver.assistant.loading import StartupError
    from quicksilver.assistant.wiring import Wiring
    from quicksilver.engine import Engine
    from quicksilver.ui.app import QuicksilverApp
    from quicksilver.ui.app.widgets import DenoiseCanvas

    engine = Engine.load("bundled", device="cpu")
    drafts = [
        Denoise(1, f.step, f.total_steps, f.thinking, f.text, f.masked, 2.0)
        for f in engine.stream("what can you do", steps=16)
    ]

    def answer_ms() -> list[float]:
        times = []
        for _ in range(answers):
            started = time.perf_counter()
            engine.answer("what can you do", steps=16)
            times.append((time.perf_counter() - started) * 1000)
        return times

    held = threading.Event()

    def build(*args, **kwargs):  # no session: the canvas is driven directly
        held.wait()
        raise StartupError("engine", "not in this benchmark")

    figures: dict[str, list[float]] = {"draw": [], "refresh": []}
    app = QuicksilverApp(Settings(), Wiring(microphone=False, output="none"), build=build)
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = app.query_one(DenoiseCanvas)
        for draft in drafts * 4:  # the drawing alone
            canvas.add_step(draft)
            started = time.perf_counter()
            canvas._next_frame()  # what the canvas's timer does once per frame
            drawn = time.perf_counter()
            await pilot.pause()  # and the screen refreshed
            figures["draw"].append((drawn - started) * 1000)
            figures["refresh"].append((time.perf_counter() - drawn) * 1000)
        figures["engine, app idle"] = await asyncio.to_thread(answer_ms)
        working = asyncio.create_task(asyncio.to_thread(answer_ms))
        while not working.done():  # the canvas plays drafts at its own pace all along
            for draft in drafts:
                canvas.add_step(draft)
            await asyncio.sleep(0.2)
        figures["engine, app animating"] = await working
        held.set()
        await pilot.pause(0.3)  # the start-up failure drawn before the app goes
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=40, help="engine answers per mode")
    parser.add_argument("--paints", type=int, default=3, help="fresh processes to time")
    args = parser.parse_args()
    paints = [first_paint_s() for _ in range(args.paints)]
    figures = asyncio.run(drawing_against_denoising(args.answers))
    print(
        f"first paint (process start to painted screen): {', '.join(f'{s:.2f}' for s in paints)} s"
    )
    for name, values in figures.items():
        print(
            f"{name:<24} p50 {statistics.median(values):7.2f} ms   p90 "
            f"{statistics.quantiles(values, n=10)[-1]:7.2f} ms   ({len(values)})"
        )
    idle, busy = (statistics.median(figures[f"engine, app {k}"]) for k in ("idle", "animating"))
    print(f"engine answer with the app animating / idle: {busy / idle:.2f}")


if __name__ == "__main__":
    main()
