"""The built distribution: one import root, ``quicksilver``, carrying the shipped model.

The wheel is built from a copy of the working tree, as ``pip install .`` builds it, so
the build's own files (``build/``, ``*.egg-info``) never land in the checkout, where an
egg-info would shadow the editable install's entry points.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def source_copy(folder: Path) -> Path:
    """The files git tracks or would track (not the ignored ones), copied to ``folder``."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, folder / name)
    return folder


def pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", *args, "--no-deps", "--quiet"],
        check=True, timeout=600, capture_output=True,
    )  # fmt: skip


def test_a_plain_install_is_one_import_root_carrying_the_model(tmp_path):
    pip("wheel", "-w", str(tmp_path / "dist"), str(source_copy(tmp_path / "src")))
    (wheel,) = (tmp_path / "dist").glob("quicksilver-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"quicksilver", wheel.name.split("-py")[0] + ".dist-info"}, tops
    for package in ("engine", "audio", "assistant", "ui", "models"):
        assert f"quicksilver/{package}/__init__.py" in names
    for file in ("config.json", "model.safetensors", "tokenizer.json", "MODEL_CARD.md"):
        assert f"quicksilver/models/reasoner_tiny/{file}" in names
    routed = "quicksilver/models/reasoner_tiny/routed"
    for file in (
        "routing.json",
        "router/model.safetensors",
        "experts/numbers/config.json",
        "default/model.safetensors",
    ):
        assert f"{routed}/{file}" in names  # the routed build, beside the general model
    assert "quicksilver/ui/app/app.tcss" in names  # the terminal app's stylesheet
    for file in ("index.html", "app.js", "capture.js", "style.css"):  # the browser page
        assert f"quicksilver/ui/server/static/{file}" in names
    metadata = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "quicksilver = quicksilver.ui.cli:main" in entry_points

    target = tmp_path / "site"
    pip("install", "--target", str(target), str(wheel))
    probe = (
        "import datetime, importlib.util; from quicksilver.engine import Engine; "
        "engine = Engine.load('bundled'); "  # by name: the checkpoint's entry point
        "print(engine.date_context(datetime.date(2026, 12, 2))); "  # the preparation's
        "print(engine.answer('what is 17 times 3').text); "
        "print(Engine.load('reasoner-tiny-routed').answer('sort 9, 2 and 5').expert); "
        "print(Engine.__module__, importlib.util.find_spec('quicksilver.engine').origin); "
        "print([m for m in ('engine', 'audio', 'assistant', 'ui', 'models') "
        "if importlib.util.find_spec(m)])"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    date, answer, expert, where, bare = loaded.stdout.splitlines()
    assert date == "Today is Wednesday, December 2, 2026."
    assert answer == "17 times 3 is 51."
    assert expert == "numbers"  # the routed build loads, its expert from the wheel
    assert where.split()[1].startswith(str(target)) and bare == "[]"
