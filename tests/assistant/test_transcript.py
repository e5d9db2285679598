"""The transcript log on real files: durable lines, torn lines, failed writes, the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from quicksilver.assistant.transcript import TranscriptLog, TurnRecord, default_log_path

from .conftest import REPO, clean_env, quicksilver


def record(turn: int, **fields) -> TurnRecord:
    values = dict(
        user=f"what is {turn} times 3",
        started_at=f"2026-11-29T14:0{turn % 10}:00+01:00",
        thinking=f"{turn}*3={turn * 3}",
        answer=f"{turn} times 3 is {turn * 3}.",
        spoken=f"{turn} times 3 is {turn * 3}.",
        metrics={"engine_ms": 41.5, "steps": 16, "voice_to_voice_ms": None},
    )
    values.update(fields)
    return TurnRecord(turn=turn, **values)


def test_turns_come_back_as_they_were_written(tmp_path):
    log = TranscriptLog(tmp_path / "deep" / "er" / "history.jsonl")  # folders are created
    written = [
        record(1),
        record(2, source="text", user="héllo “quoted”\nsecond line"),
        record(3, interrupted=True, spoken="3 times"),
    ]
    for turn in written:
        assert log.append(turn) is None
    assert log.read_recent(10) == (written, [])
    assert log.read_recent(2) == (written[1:], [])
    assert log.read_recent(0) == ([], [])
    lines = log.path.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 4 and lines[-1] == ""  # one line per turn, newline-terminated
    assert "héllo “quoted”" in lines[1]  # readable, not escaped


def test_a_record_has_a_local_iso_start_time_and_tolerates_newer_fields():
    started = TurnRecord(turn=1, user="hi").started_at
    assert started[10] == "T" and started[-6] in "+-"  # 2026-11-29T14:03:12+01:00
    data = {**record(4).to_dict(), "added_in_a_later_version": 1}
    assert TurnRecord.from_dict(data) == record(4)
    with pytest.raises(ValueError, match="needs \\['user'\\]"):
        TurnRecord.from_dict({"turn": 1})


def test_the_default_log_lives_in_the_xdg_data_directory(tmp_path):
    assert default_log_path({"XDG_DATA_HOME": str(tmp_path)}) == (
        tmp_path / "quicksilver" / "history.jsonl"
    )
    assert default_log_path({"HOME": str(tmp_path)}) == (
        tmp_path / ".local" / "share" / "quicksilver" / "history.jsonl"
    )


def test_a_missing_log_has_no_turns_and_a_torn_line_is_skipped(tmp_path):
    log = TranscriptLog(tmp_path / "history.jsonl")
    assert log.read_recent(5) == ([], [])
    log.append(record(1))
    log.append(record(2))
    with log.path.open("ab") as file:  # a write cut short by a crash
        file.write(b'{"turn": 3, "user": "what is 3 ti')
    records, skipped = log.read_recent(5)
    assert [r.turn for r in records] == [1, 2]
    assert skipped == [f"skipped line 3 of {log.path}: cut short"]

    assert log.append(record(4)) is None  # the next turn starts on a line of its own
    records, skipped = log.read_recent(5)
    assert [r.turn for r in records] == [1, 2, 4]
    assert skipped == [f"skipped line 3 of {log.path}: not a turn record"]


def test_a_log_that_cannot_be_read_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cannot read the transcript log"):
        TranscriptLog(tmp_path).read_recent(3)


def test_a_write_into_a_place_that_cannot_hold_it_returns_why_instead_of_raising(tmp_path, caplog):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file where the log's folder should be")
    log = TranscriptLog(blocker / "quicksilver" / "history.jsonl")
    failure = log.append(record(1))
    assert failure is not None
    assert str(log.path) in failure.message and "turn 1" in failure.message
    assert "log_path" in failure.hint and "conversation goes on" in failure.hint
    assert caplog.text == ""  # said once, by whoever reads the failure (an Error event)
    assert TranscriptLog("/proc/quicksilver-history.jsonl").append(record(2)) is not None


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_disk_warns_instead_of_raising():
    failure = TranscriptLog("/dev/full").append(record(1))  # every write: ENOSPC
    assert failure is not None and "No space left on device" in failure.message


APPEND_FOREVER = """
import sys
from quicksilver.assistant.transcript import TranscriptLog, TurnRecord

log = TranscriptLog(sys.argv[1])
turn = 0
while True:
    turn += 1
    failure = log.append(TurnRecord(turn=turn, user=f"question {turn}", answer="x" * 3000))
    assert failure is None, failure
    print(turn, flush=True)
"""


def test_kill_9_loses_no_completed_turn(tmp_path):
    path = tmp_path / "history.jsonl"
    writer = subprocess.Popen(
        [sys.executable, "-c", APPEND_FOREVER, str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    reported = 0
    try:
        while reported < 40:
            line = writer.stdout.readline()
            assert line, f"the writer stopped early (exit status {writer.poll()})"
            reported = int(line)
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=30)
    reported = max([reported, *(int(line) for line in writer.stdout.read().split())])
    writer.stdout.close()
    assert writer.returncode == -signal.SIGKILL

    *whole, last = path.read_bytes().split(b"\n")
    turns = [json.loads(line)["turn"] for line in whole]  # every finished line parses
    assert turns == list(range(1, len(turns) + 1))
    assert len(turns) >= reported  # every turn reported as written is there
    records, skipped = TranscriptLog(path).read_recent(1000)
    assert len(records) == len(turns) and len(skipped) == (1 if last else 0)


def test_quicksilver_history_prints_recent_turns(tmp_path):
    env = clean_env(XDG_DATA_HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    empty = quicksilver("history", env=env)
    assert empty.returncode == 0 and "no turns yet" in empty.stdout

    log = TranscriptLog(default_log_path(env))
    for turn in (record(1), record(2), record(3, interrupted=True, spoken="3 times")):
        log.append(turn)
    result = quicksilver("history", "-n", "2", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "2026-11-29 14:02:00  you: what is 2 times 3",
        "                     quicksilver: 2 times 3 is 6.",
        "2026-11-29 14:03:00  you: what is 3 times 3",
        "                     quicksilver: 3 times (interrupted)",
    ]
    data = json.loads(quicksilver("history", "--json", env=env).stdout)
    assert [TurnRecord.from_dict(d) for d in data] == log.read_recent(10)[0]

    with log.path.open("a") as file:
        file.write('{"turn": 4, "us')
    torn = quicksilver("history", "-n", "1", env=env)
    assert torn.returncode == 0 and "quicksilver: 3 times (interrupted)" in torn.stdout
    assert torn.stderr == f"quicksilver history: skipped line 4 of {log.path}: cut short\n"

    bad = quicksilver("history", "-n", "0", env=env)
    assert bad.returncode == 2 and "-n must be at least 1" in bad.stderr


def test_quicksilver_history_follows_the_log_path_setting(tmp_path):
    elsewhere = tmp_path / "elsewhere.jsonl"
    TranscriptLog(elsewhere).append(record(7))
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), QUICKSILVER_LOG_PATH=str(elsewhere))
    result = quicksilver("history", env=env)
    assert result.returncode == 0 and "what is 7 times 3" in result.stdout
