"""The audio commands: transcribe, say, devices, with their errors for user mistakes."""

from __future__ import annotations

import numpy as np
import pytest
from quicksilver.audio.resample import resample
from quicksilver.audio.wavfile import read_wav, write_wav
from quicksilver.ui.cli import main

from tests.conftest import RATE, digits_in, silence


def test_transcribe_prints_the_transcript(tmp_path, espeak, capsys):
    path = tmp_path / "question.wav"
    write_wav(path, resample(espeak("What is seventeen times three?"), RATE, 48000), 48000)
    assert main(["transcribe", str(path)]) == 0
    assert {"17", "3"} <= digits_in(capsys.readouterr().out)
    assert main(["transcribe", "--timestamps", str(path)]) == 0
    assert capsys.readouterr().out.startswith("[00:00.0 → 00:0")


def test_transcribe_silence_and_bad_files(tmp_path, capsys):
    write_wav(tmp_path / "quiet.wav", silence(2), RATE)
    assert main(["transcribe", str(tmp_path / "quiet.wav")]) == 1
    assert "no speech found" in capsys.readouterr().err
    (tmp_path / "empty.wav").write_bytes(b"")
    assert main(["transcribe", str(tmp_path / "empty.wav")]) == 2
    assert "empty (0 bytes)" in capsys.readouterr().err
    assert main(["transcribe", str(tmp_path / "absent.wav")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_say_writes_speech_that_whisper_understands(tmp_path, transcriber, capsys):
    out = tmp_path / "answer.wav"
    assert main(["say", "Seventeen times 3 is 51.", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    text = transcriber.transcribe(read_wav(out))
    # Piper samples its durations and tiny.en is small: two of the three numbers suffice
    assert len({"17", "3", "51"} & digits_in(text)) >= 2, text


@pytest.mark.parametrize("text", ["", "?!...", "   "])
def test_say_with_nothing_to_say(tmp_path, text, capsys):
    assert main(["say", text, "-o", str(tmp_path / "x.wav")]) == 2
    assert "nothing to say" in capsys.readouterr().err


def test_say_bad_options_and_voice(tmp_path, capsys):
    assert main(["say", "hi", "--rate", "9", "-o", str(tmp_path / "x.wav")]) == 2
    assert "speaking rate" in capsys.readouterr().err
    assert main(["say", "hi", "--voice", "nobody", "-o", str(tmp_path / "x.wav")]) == 2
    assert "unknown Piper voice" in capsys.readouterr().err


def test_say_plays_on_the_speaker(pulse, transcriber, capsys):
    recording = pulse.recording_speaker()
    assert main(["say", "Seventeen times three.", "--output-device", "pulse"]) == 0

    heard = recording.stop()
    assert np.abs(heard).max() > 0.1
    assert {"17", "3"} <= digits_in(transcriber.transcribe(heard))


def test_devices_lists_inputs_and_outputs(pulse, capsys):
    assert main(["devices"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("inputs:") and "outputs:" in out and "pulse" in out and "Hz" in out
