"""Snapshots of the main screen mid-denoise, after an answer and after an answer withheld
(too unsure: "I'm not sure", the model's own answer dim below), at 80×24 and 120×40, in
the dark and the light theme.

The app runs a real (typed) session; the turn on screen is a scripted event sequence,
so every run draws the same thing. Each snapshot is Textual's own SVG screenshot, kept
in ``snapshots/`` for people to look at; the test compares what it shows: every piece
of text with its row, column and colour. ``QUICKSILVER_SNAPSHOTS=update pytest
tests/ui/test_snapshots.py`` rewrites them after a deliberate change (look at them).
"""

from __future__ import annotations

import functools
import html
import os
import re
from pathlib import Path

import pytest
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    Event,
    FinalTranscript,
    Listening,
    TurnMetrics,
)
from quicksilver.assistant.factory import build_session
from quicksilver.assistant.stages import UNSURE
from quicksilver.ui.app import QuicksilverApp
from quicksilver.ui.app.widgets import MASK_GLYPH, AssistantMessage, DenoiseCanvas

from tests.ui.test_app import TYPED, started, until

pytestmark = pytest.mark.asyncio
SNAPSHOTS = Path(__file__).parent / "snapshots"
QUESTION, THINKING, ANSWER = (
    "what is 17 times 3",
    "017*003: 7*3+0=21 1*3+2=05 → 051",
    ("17 times 3 is 51."),
)
STEPS = 16


def draft(text: str, step: int) -> str:
    """``text`` as step ``step`` of ``STEPS`` shows it: a fixed scatter of positions still
    masked, fewer each step."""
    return "".join(
        char if (i * 7) % STEPS < step or char == " " else MASK_GLYPH for i, char in enumerate(text)
    )


def turn(until_step: int, withheld: bool = False) -> list[Event]:
    """A typed turn up to ``until_step``; past the last step, with its answer and figures
    (``withheld``: the answer not said, at confidence 0.41)."""
    events: list[Event] = [FinalTranscript(1, QUESTION, "text")]
    for step in range(1, min(until_step, STEPS) + 1):
        masked = draft(ANSWER, step).count(MASK_GLYPH)
        events.append(
            Denoise(1, step, STEPS, draft(THINKING, step), draft(ANSWER, step), masked, 2.5)
        )
    if until_step > STEPS:
        ready = AnswerReady(1, ANSWER, THINKING, STEPS, STEPS, 45.0)
        if withheld:
            ready = AnswerReady(1, UNSURE, THINKING, STEPS, STEPS, 45.0, 0, 0.4137, ANSWER)
        events += [
            ready,
            TurnMetrics(1, engine_ms=45.0, steps=STEPS),
            Listening(1),
        ]
    return events


def shown(svg: str) -> list[str]:
    """What a screenshot shows: each piece of text with its position and colour."""
    fills = dict(re.findall(r"\.(terminal-[\w-]+) \{ fill: (#[0-9a-f]+)", svg))
    pieces = re.findall(
        r'<text class="([\w-]+)" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg
    )
    return [
        f"{float(y):7.1f} {float(x):7.1f} {fills.get(css, '-')} {html.unescape(text)}"
        for css, x, y, text in pieces
    ]


@pytest.mark.parametrize("theme", ["textual-dark", "textual-light"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("moment", ["mid-denoise", "answered", "withheld"])
async def test_the_main_screen_looks_as_it_did(reasoner, moment, size, theme):
    build = functools.partial(build_session, engine=reasoner)
    app = QuicksilverApp(Settings(steps=STEPS), TYPED, build=build)
    async with app.run_test(size=size) as pilot:
        await started(pilot, app)
        app.theme = theme
        for event in turn(7 if moment == "mid-denoise" else STEPS + 1, moment == "withheld"):
            app.show_event(event)
        canvas = app.query_one(DenoiseCanvas)
        if moment == "mid-denoise":
            await until(pilot, lambda: canvas.frames_drawn.get(1) == 7, what="step 7 drawn")
        else:
            await until(pilot, lambda: app.query(AssistantMessage), what="the answer shown")
        await pilot.pause(0.2)
        svg = app.export_screenshot(title="Quicksilver")

    name = f"{moment}-{size[0]}x{size[1]}-{theme}"
    path = SNAPSHOTS / f"{name}.svg"
    if os.environ.get("QUICKSILVER_SNAPSHOTS") == "update" or not path.exists():
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(svg)
        pytest.fail(f"wrote the snapshot {path}: look at it, then run the test again")
    assert shown(svg) == shown(path.read_text()), f"{name} differs from {path}"
    if moment == "mid-denoise":
        assert any("7/16" in line for line in shown(svg))
    if moment == "withheld":  # under what was said, and beside the turn's figures
        lines = [line.replace("\xa0", " ") for line in shown(svg)]
        assert any("not said, confidence 0.41: 17 times 3 is 51." in line for line in lines)
        assert any("engine 45 ms · confidence 0.41" in line for line in lines)
