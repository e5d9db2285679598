"""The built distribution: one import root, ``quicksilver``, and nothing else at the top."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_installs_everything_under_one_import_root(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
         str(REPO)],
        check=True, timeout=600, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("quicksilver-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"quicksilver", wheel.name.split("-py")[0] + ".dist-info"}, tops
    for package in ("engine", "audio", "assistant", "ui", "models"):
        assert f"quicksilver/{package}/__init__.py" in names
    assert "quicksilver/models/reasoner_tiny/model.safetensors" in names
    assert not any(name.startswith("quicksilver/tests") for name in names)
    metadata = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(wheel).read(metadata).decode()
    assert "quicksilver = quicksilver.ui.cli:main" in entry_points
    assert "bundled = quicksilver.models:bundled" in entry_points

    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target",
         str(target), str(wheel)],
        check=True, timeout=600, capture_output=True,
    )  # fmt: skip
    probe = (
        "import importlib.util, sys; from quicksilver.engine import Engine; "
        "import quicksilver.engine as e; print(e.__file__); "
        "print([m for m in ('engine', 'audio', 'assistant', 'ui', 'models') "
        "if importlib.util.find_spec(m)])"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    where, bare = result.stdout.splitlines()
    assert where.startswith(str(target)) and bare == "[]"
