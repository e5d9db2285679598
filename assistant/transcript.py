"""The transcript log: one JSON line per completed turn, durable the moment it is written.

Each ``append`` is a single ``write`` of one whole line on a file opened for appending,
followed by ``fsync``, so a crash or ``kill -9`` loses no completed turn. A failed write
(full disk, read-only place) never stops the conversation: ``append`` returns a
``LogFailure`` that :mod:`~quicksilver.assistant.transcript_writer` reports as an
``Error`` event. Readers skip a line cut short
by a crash instead of refusing the whole file.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from .config import xdg_dir

Source = Literal["voice", "text", "file"]


def now_iso() -> str:
    """The local time with its UTC offset, to the second: ``2026-11-29T14:03:12+01:00``."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


@dataclass
class TurnRecord:
    """One completed turn.

    ``answer`` is the whole spoken answer the engine wrote; ``spoken`` is what the user
    actually heard (all of it, or the part played before a barge-in when ``interrupted``).
    ``metrics`` holds the per-stage milliseconds of ``events.TurnMetrics``.
    ``confidence`` is the engine's ``Answer.confidence``; ``withheld`` the model's own
    answer when it was too unsure to be said (``answer`` then holds what was said instead).
    """

    turn: int
    user: str
    started_at: str = field(default_factory=now_iso)
    thinking: str = ""
    answer: str = ""
    interrupted: bool = False
    spoken: str = ""
    source: Source = "voice"
    metrics: dict[str, Any] = field(default_factory=dict)
    confidence: float | None = None
    withheld: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TurnRecord:
        """A record from its JSON form; keys this version does not know are ignored."""
        known = {f.name for f in fields(cls)}
        missing = {"turn", "user"} - data.keys()
        if missing:
            raise ValueError(f"a turn record needs {sorted(missing)}")
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass(frozen=True)
class LogFailure:
    """Why a turn could not be logged, and what the user can do (an ``Error`` event's words)."""

    message: str
    hint: str


def default_log_path(env: Mapping[str, str] = os.environ) -> Path:
    return xdg_dir(env, "XDG_DATA_HOME", ".local/share") / "quicksilver" / "history.jsonl"


class TranscriptLog:
    """Appends turns to a JSON-lines file and reads the recent ones back."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_log_path()

    def append(self, record: TurnRecord) -> LogFailure | None:
        """Write ``record`` durably; ``None`` when done, else why not (never raises OSError)."""
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        try:
            self._write(line.encode())
        except OSError as error:
            failure = LogFailure(
                message=f"could not write turn {record.turn} to the transcript log "
                f"{self.path}: {error.strerror or error}",
                hint="free some disk space, or set log_path in config.toml (or "
                "QUICKSILVER_LOG_PATH) to a writable file; the conversation goes on",
            )
            return failure
        return None

    def _write(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a crash cut the last line short: start a fresh one
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            os.fsync(fd)
        finally:
            os.close(fd)
        if created:  # make the new file's name durable too
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

    def read_recent(self, n: int) -> tuple[list[TurnRecord], list[str]]:
        """The last ``n`` turns, oldest first, and a warning for each line that was skipped.

        A line that is not a whole record (a write cut short by a crash) is skipped, so a
        damaged file still shows every turn it holds. A missing file has no turns; one
        that cannot be read raises ``ValueError``.
        """
        records: deque[TurnRecord] = deque(maxlen=max(n, 0))
        skipped: list[str] = []
        try:
            with self.path.open(encoding="utf-8", errors="replace") as file:
                for number, line in enumerate(file, start=1):
                    if not line.strip():
                        continue
                    try:
                        records.append(TurnRecord.from_dict(json.loads(line)))
                    except (ValueError, TypeError, AttributeError):
                        whole = "cut short" if not line.endswith("\n") else "not a turn record"
                        skipped.append(f"skipped line {number} of {self.path}: {whole}")
        except FileNotFoundError:
            return [], []
        except OSError as error:
            raise ValueError(f"cannot read the transcript log {self.path}: {error}") from None
        return list(records), skipped
