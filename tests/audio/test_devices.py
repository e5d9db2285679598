"""Real PortAudio devices on a virtual PulseAudio server: microphone, speaker, faults."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from quicksilver.audio.devices import (
    AudioDeviceError,
    Microphone,
    Speaker,
    find_device,
    list_devices,
)
from quicksilver.audio.resample import resample
from quicksilver.audio.streaming import FinalText, StreamingTranscriber
from quicksilver.audio.synthetic_speech import trim
from quicksilver.audio.vad import SpeechStart

from benchmarks.pulse import refresh_portaudio, running_pulse
from tests.conftest import RATE, digits_in

QUESTION = "What is seventeen times three?"


def listen_for_final(mic: Microphone, stream: StreamingTranscriber, limit_s: float):
    events = []
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        events += stream.feed(mic.read())
        if any(isinstance(e, FinalText) for e in events):
            return events
    pytest.fail(f"no final transcript within {limit_s} s; events: {events}")


def test_devices_are_listed_and_selected(pulse):
    devices = list_devices()
    assert any(d.input_channels > 0 for d in devices)
    assert any(d.output_channels > 0 for d in devices)
    by_name = find_device("PULSE", "input")
    assert by_name.name == "pulse"
    assert find_device(by_name.index, "output").index == by_name.index
    assert find_device(None, "input").is_default_input
    with pytest.raises(AudioDeviceError, match="quicksilver devices"):
        find_device(999, "input")
    with pytest.raises(AudioDeviceError, match="available"):
        find_device("no such card", "output")


@pytest.mark.parametrize("device_rate", [None, 48000])
def test_microphone_vad_and_whisper_transcribe_the_fifo(pulse, espeak, transcriber,
                                                        device_rate):  # fmt: skip
    """Speech written into the FIFO in real time comes out as the right transcript; at
    48 kHz the microphone resamples to 16 kHz itself."""
    with Microphone("pulse", device_rate=device_rate) as mic:
        assert mic.device_rate == (device_rate or RATE)
        writer = pulse.speak_into_mic(espeak(QUESTION), lead_s=0.6, tail_s=1.5)
        stream = StreamingTranscriber(transcriber)
        events = listen_for_final(mic, stream, limit_s=20)
        frame = mic.read()
    writer.join(timeout=10)
    assert frame.shape == (512,) and frame.dtype == np.float32
    assert isinstance(events[0], SpeechStart)
    final = next(e for e in events if isinstance(e, FinalText))
    assert {"17", "3"} <= digits_in(final.text), final.text
    assert mic.overflows == 0


def test_speaker_output_heard_on_the_sink_monitor(pulse, voice, transcriber):
    speech = voice.speak(QUESTION)
    recording = pulse.recording_speaker()
    time.sleep(0.5)
    with Speaker("pulse", sample_rate=voice.sample_rate) as speaker:
        for chunk in np.array_split(speech, 5):  # arrives in pieces, like sentences
            speaker.play(chunk)
        assert speaker.wait(timeout=30)
        played = speaker.played_s
    time.sleep(0.3)
    heard = recording.stop()
    assert played == pytest.approx(speech.size / voice.sample_rate, abs=0.05)
    spoken_s, heard_s = trim(speech).size / voice.sample_rate, trim(heard).size / RATE
    # all of it arrives; a loaded machine may add underrun gaps, never drop speech
    assert spoken_s - 0.25 <= heard_s <= spoken_s + 1.0, (heard_s, spoken_s)
    assert {"17", "3"} <= digits_in(transcriber.transcribe(heard))


def sound_bursts(heard: np.ndarray, threshold: float = 0.1, gap_s: float = 0.3) -> list[float]:
    """Seconds of sound in each burst of a 16 kHz recording, in 10 ms frames; stretches
    apart by less than ``gap_s`` of silence (underruns on a loaded machine) are one burst."""
    frames = np.abs(heard[: heard.size // 160 * 160]).reshape(-1, 160).max(axis=1) > threshold
    edges = np.flatnonzero(np.diff(np.concatenate([[0], frames.astype(int), [0]])))
    bursts: list[list[int]] = []  # [last frame + 1, loud frames]
    for start, end in zip(edges[::2], edges[1::2], strict=True):
        if bursts and start - bursts[-1][0] < gap_s * 100:
            bursts[-1] = [end, bursts[-1][1] + end - start]
        else:
            bursts.append([end, end - start])
    return [loud / 100 for _, loud in bursts]


def test_speaker_stop_cuts_playback_and_reports_what_was_heard(pulse):
    """stop() silences the sink, returns about the seconds that reached it, and the speaker
    plays again afterwards. How precisely (the device buffer dropped, not played out, and
    the report within tens of ms) depends on the machine's load: that is measured by
    ``python -m benchmarks.speaker``."""
    rate = 22050
    tone = (0.3 * np.sin(2 * np.pi * 440 * np.arange(6 * rate) / rate)).astype(np.float32)
    recording = pulse.recording_speaker()
    time.sleep(0.3)
    reported = []
    with Speaker("pulse", sample_rate=rate) as speaker:
        # a fresh PulseAudio stream may hold its first blocks a while before it starts
        speaker.play(np.zeros(rate // 2, dtype=np.float32))
        assert speaker.wait(timeout=10)
        for wait_s in (0.6, 1.2):
            start_s = speaker.played_s  # counted since the speaker opened, or last stopped
            began = time.monotonic()
            speaker.play(tone)
            time.sleep(wait_s)
            reported.append((speaker.stop() - start_s, time.monotonic() - began))
            assert not speaker.busy
            time.sleep(0.8)
    heard = sound_bursts(recording.stop())
    assert len(heard) == 2, (heard, reported)  # each 6 s tone cut short, and played again
    for heard_s, (played, elapsed) in zip(heard, reported, strict=True):
        # stop() reports what had sounded: something, and no more than the time since
        # play() (a block or two more if an underrun made the device catch up)
        assert 0 < played < elapsed + 0.1, reported
        # the sink heard about that much (nothing like the 6 s queued)
        assert heard_s == pytest.approx(played, rel=0.5), (heard, reported)


def test_microphone_reports_a_vanished_device(tmp_path, espeak):
    """The sound server dies mid-stream: read() raises a clear error, close() returns."""
    with running_pulse(tmp_path / "doomed") as server:
        mic = Microphone("pulse", stall_timeout_s=5)
        server.speak_into_mic(espeak(QUESTION), lead_s=0.2, tail_s=3)
        for _ in range(10):
            mic.read()
        server.process.kill()
        server.process.wait(timeout=10)
        started = time.monotonic()
        # within twice the stall timeout (python -m benchmarks.microphone: about 50 ms)
        with pytest.raises(AudioDeviceError, match=r"stopped|no audio"):
            while time.monotonic() - started < 10:
                mic.read()
        started = time.monotonic()
        mic.close()
        assert time.monotonic() - started < 2


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_no_sound_server_means_no_devices(tmp_path):
    """Without a reachable server PortAudio sees nothing: each entry point says so."""
    env = {**os.environ, "PULSE_SERVER": f"unix:{tmp_path}/nothing-here"}
    code = """
        from quicksilver.audio.devices import AudioDeviceError, Microphone, Speaker
        for device in (Microphone, Speaker):
            try:
                device()
            except AudioDeviceError as error:
                print(error)
    """
    result = _run(code, env)
    assert result.returncode == 0, result.stderr
    assert "no input device found" in result.stdout
    assert "no output device found" in result.stdout
    cli = _run("from quicksilver.ui.cli import main; raise SystemExit(main(['say', 'hello']))", env)
    assert cli.returncode == 2 and "Traceback" not in cli.stderr
    assert "no output device found" in cli.stderr and "-o OUT.wav" in cli.stderr


def test_missing_portaudio_library(tmp_path):
    """With libportaudio hidden (a private mount namespace), the error says what to install."""
    import sounddevice  # noqa: F401  (loads the library, so its path is in our memory map)

    maps = Path("/proc/self/maps").read_text().splitlines()
    library = next(line.split()[-1] for line in maps if "libportaudio" in line)
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("needs mount namespaces (unshare -m) to hide the PortAudio library")
    command = "from quicksilver.ui.cli import main; raise SystemExit(main(['devices']))"
    script = f'mount --bind /dev/null {library} && {sys.executable} -c "{command}"'
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                            text=True, timeout=120, cwd=os.getcwd())  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert "PortAudio could not be loaded" in result.stderr
    assert "libportaudio2" in result.stderr


def test_refresh_sees_the_server_again(pulse):
    refresh_portaudio()
    assert any(d.name == "pulse" for d in list_devices())
    assert resample(np.zeros(480, np.float32), 48000, RATE).size == 160
