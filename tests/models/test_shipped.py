"""The shipped reasoner-tiny: it loads by name, answers, and travels inside the package."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from engine import Engine
from models import bundled
from models.reasoner_tiny.corpus import SKILLS, held_out_set
from models.reasoner_tiny.evaluate import is_right

QUICKSILVER = shutil.which("quicksilver")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load("bundled")


def test_bundled_is_the_shipped_folder(engine):
    assert (bundled() / "model.safetensors").is_file()
    assert (bundled() / "MODEL_CARD.md").is_file()
    assert (bundled() / "model.safetensors").stat().st_size < 40 * 2**20
    assert engine.model.config.parameter_count() > 1_000_000
    assert not engine.model.config.prompt_sees_reply  # its prompt cache is exact


@pytest.mark.parametrize("skill", sorted(SKILLS))
def test_answers_a_held_out_question_of_every_skill(engine, skill):
    """The first held-out questions of each skill (numbers, words, phrasings unseen)."""
    items = held_out_set(per_skill=3, seed=99, skills=[skill])[skill]
    right = [is_right(item, engine.answer(item.messages(), steps=16).text) for item in items]
    assert sum(right) >= 2, [(i.question, i.answer) for i in items]


def test_spoken_answers_hold_no_markup(engine):
    for item in held_out_set(per_skill=2, seed=5).values():
        answer = engine.answer(item[0].messages(), steps=16)
        assert "<|" not in answer.text and "░" not in answer.text
        assert answer.forward_passes == answer.steps == 16


@pytest.mark.skipif(QUICKSILVER is None, reason="the package is not installed")
def test_ask_json_with_the_shipped_model():
    result = subprocess.run(
        [QUICKSILVER, "ask", "What's seventeen times three?", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert set(data) == {"answer", "thinking", "steps", "forward_passes", "latency_ms"}
    assert data["forward_passes"] == data["steps"] == 16
    assert data["answer"] == "17 times 3 is 51."


def test_a_plain_install_carries_the_model(tmp_path):
    """Build the wheel as `pip install .` would and look inside it."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            ".",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            "-q",
        ],
        check=True,
        timeout=300,
        cwd=bundled().parents[1],
    )
    (wheel,) = tmp_path.glob("quicksilver-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for file in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
        assert f"models/reasoner_tiny/{file}" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[quicksilver.checkpoints]" in text and "bundled = models:bundled" in text
