"""Settings layering (defaults → config.toml → QUICKSILVER_* → flags), with real files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from quicksilver.assistant.config import NAMES, Settings, default_config_path, load_settings
from quicksilver.audio.tts import DEFAULT_VOICE
from quicksilver.audio.vad import VadConfig

from .conftest import clean_env, quicksilver


def write_config(folder: Path, text: str) -> Path:
    path = folder / "quicksilver" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_when_there_is_no_config_file(tmp_path):
    settings, sources = load_settings({}, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert settings == Settings()
    assert sources == dict.fromkeys(NAMES, "default")
    # steps unset: the model's own default; the voice is the audio part's own, Whisper the
    # project's fine-tune of the bundled tiny.en
    assert settings.steps is None and settings.model == "bundled" and settings.headset is False
    assert (settings.whisper_model, settings.voice) == ("tiny.en-quicksilver", DEFAULT_VOICE)
    assert settings.hangover_ms == VadConfig().hangover_ms


def test_each_layer_overrides_the_one_before_and_says_so(tmp_path):
    path = write_config(
        tmp_path, 'steps = 8\nvoice = "en_GB-alan-low"\nheadset = true\nhangover_ms = 700\n'
    )
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "QUICKSILVER_STEPS": "12",
        "QUICKSILVER_HEADSET": "no",
        "QUICKSILVER_VOICES": "/somewhere",  # audio's own variable, not a setting
    }
    settings, sources = load_settings({"steps": 24}, env=env)
    assert settings.steps == 24 and sources["steps"] == "command line"
    assert settings.headset is False and sources["headset"] == "environment QUICKSILVER_HEADSET"
    assert settings.voice == "en_GB-alan-low" and sources["voice"] == f"config file {path}"
    assert settings.hangover_ms == 700 and sources["hangover_ms"] == f"config file {path}"
    assert settings.model == "bundled" and sources["model"] == "default"  # no flag given


def test_config_file_location_follows_xdg_then_home(tmp_path):
    assert default_config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == (
        tmp_path / "quicksilver" / "config.toml"
    )
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": "relative/not/allowed"}
    assert default_config_path(home) == tmp_path / ".config" / "quicksilver" / "config.toml"
    write_config(tmp_path / ".config", "steps = 5\n")
    assert load_settings({}, env=home)[0].steps == 5


def test_an_explicit_config_path_wins_over_the_default_location(tmp_path):
    write_config(tmp_path, "steps = 5\n")
    other = tmp_path / "other.toml"
    other.write_text("steps = 7\n")
    settings, sources = load_settings({}, env={"XDG_CONFIG_HOME": str(tmp_path)}, config_path=other)
    assert settings.steps == 7 and sources["steps"] == f"config file {other}"


def test_values_are_converted_to_the_field_types(tmp_path):
    path = write_config(
        tmp_path, 'input_device = 3\noutput_device = ""\nlog_path = "logs/h.jsonl"\n'
    )
    env = {
        "XDG_CONFIG_HOME": str(tmp_path),
        "QUICKSILVER_SHOW_THINKING": " Yes ",
        "QUICKSILVER_SPECULATIVE_MS": "0",
        "QUICKSILVER_WHISPER_MODEL": "base.en",
    }
    settings, _ = load_settings({"max_turns": "3"}, env=env)
    assert settings.input_device == "3"  # a device index written as a number
    assert settings.output_device is None  # "" means the system's device
    assert settings.log_path == path.parent / "logs" / "h.jsonl"  # relative to the file
    assert settings.show_thinking is True and settings.speculative_ms == 0
    assert settings.whisper_model == "base.en" and settings.max_turns == 3

    home = load_settings({}, env={"HOME": str(tmp_path), "QUICKSILVER_LOG_PATH": "~/h.jsonl"})
    assert home[0].log_path == Path("~/h.jsonl").expanduser()
    unset = load_settings({}, env={"HOME": str(tmp_path), "QUICKSILVER_INPUT_DEVICE": ""})
    assert unset[0].input_device is None


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("step = 16\n", ["unknown setting 'step'", "did you mean 'steps'", "known settings"]),
        ("steps = 1.5\n", ["steps must be a whole number of at least 1", "got 1.5"]),
        ("steps = 0\n", ["steps must be a whole number of at least 1", "got 0"]),
        ("voice = true\n", ["voice must be text", "got True"]),
        ("headset = 2\n", ["headset must be true or false", "got 2"]),
        ("log_path = 5\n", ["log_path must be a file path", 'or "" for the default']),
        ("[audio]\nvoice = 'x'\n", ["unknown setting 'audio'"]),
        ("steps = \n", ["is not valid TOML", "line 1", "steps = 16"]),
        ('voice = "unclosed\n', ["is not valid TOML", "line 1"]),
    ],
)
def test_a_bad_config_file_names_the_file_the_key_and_what_is_expected(tmp_path, text, wanted):
    path = write_config(tmp_path, text)
    with pytest.raises(ValueError) as error:
        load_settings({}, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert str(path) in str(error.value)
    for part in wanted:
        assert part in str(error.value)


def test_a_config_file_that_is_not_text_or_not_a_file(tmp_path):
    path = write_config(tmp_path, "")
    path.write_bytes(b'voice = "\xff\xfe"\n')
    with pytest.raises(ValueError, match=re.escape(f"config file {path} cannot be read")):
        load_settings({}, env={"XDG_CONFIG_HOME": str(tmp_path)})
    with pytest.raises(ValueError, match=re.escape(f"config file {tmp_path} cannot be read")):
        load_settings({}, env={}, config_path=tmp_path)
    with pytest.raises(ValueError, match=re.escape("nowhere.toml does not exist")):
        load_settings({}, env={}, config_path=tmp_path / "nowhere.toml")


@pytest.mark.parametrize(
    ("variable", "value", "wanted"),
    [
        ("QUICKSILVER_STEPS", "abc", "environment QUICKSILVER_STEPS: steps must be a whole number"),
        ("QUICKSILVER_HEADSET", "", "headset must be true or false"),
        ("QUICKSILVER_HANGOVER_MS", "-5", "hangover_ms must be a whole number of at least 0"),
        ("QUICKSILVER_HEADSET", "maybe", "headset must be true or false (also yes/no"),
        ("QUICKSILVER_LOG_PATH", "  ", None),  # blank for an optional setting: the default
        ("QUICKSILVER_STEPS", "", None),
        ("QUICKSILVER_STPES", "8", "unknown setting 'stpes'; did you mean 'steps'?"),
    ],
)
def test_a_bad_environment_variable_is_named(tmp_path, variable, value, wanted):
    env = {"XDG_CONFIG_HOME": str(tmp_path), variable: value}
    if wanted is None:
        settings, sources = load_settings({}, env=env)
        assert settings == Settings() and sources[variable[12:].lower()].startswith("environ")
        return
    with pytest.raises(ValueError) as error:
        load_settings({}, env=env)
    message = str(error.value)
    assert wanted in message and message.startswith(f"environment {variable}: ")


def test_bad_command_line_values_and_names(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    with pytest.raises(ValueError, match="command line: steps must be a whole number"):
        load_settings({"steps": "many"}, env=env)
    with pytest.raises(ValueError, match="command line: unknown setting 'hangover'"):
        load_settings({"hangover": 300}, env=env)
    with pytest.raises(ValueError, match="command line: headset must be true or false"):
        load_settings({"headset": 1}, env=env)
    with pytest.raises(ValueError, match="command line: model must be text"):
        load_settings({"model": None}, env=env)  # a value, not "unset": leave it out


def test_the_audio_s_own_variable_is_not_a_misspelt_setting(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path), "QUICKSILVER_VOICES": str(tmp_path)}
    assert load_settings({}, env=env)[0] == Settings()


def test_quicksilver_config_prints_every_setting_and_its_source(tmp_path):
    path = write_config(tmp_path, 'voice = "en_GB-alan-low"\n')
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), QUICKSILVER_STEPS="32")
    result = quicksilver("config", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"# config file: {path}; environment: QUICKSILVER_<NAME>"
    by_name = {line.split()[0]: line for line in lines[1:]}
    assert list(by_name) == list(NAMES)
    assert by_name["steps"].split()[2] == "32"
    assert by_name["steps"].endswith("(environment QUICKSILVER_STEPS)")
    assert by_name["voice"].endswith(f"(config file {path})")
    assert by_name["headset"].split()[2] == "false" and by_name["headset"].endswith("(default)")
    assert "(system default)" in by_name["input_device"]

    data = json.loads(quicksilver("config", "--json", env=env).stdout)
    assert data["steps"] == {"value": 32, "source": "environment QUICKSILVER_STEPS"}
    assert data["voice"] == {"value": "en_GB-alan-low", "source": f"config file {path}"}
    assert data["log_path"] == {"value": None, "source": "default"}


def test_quicksilver_config_reports_a_bad_file_in_one_line(tmp_path):
    path = write_config(tmp_path, "steps = [\n")
    result = quicksilver("config", env=clean_env(XDG_CONFIG_HOME=str(tmp_path)))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"quicksilver config: config file {path} is not valid TOML")
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("how", "args", "env_extra", "config"),
    [
        ("environment", ["ask", "--json"], {"QUICKSILVER_STEPS": "8"}, ""),
        ("top-level flag", ["--steps", "8", "ask", "--json"], {}, ""),
        ("subcommand flag", ["ask", "--json", "--steps", "8"], {"QUICKSILVER_STEPS": "4"}, ""),
        ("config file", ["ask", "--json"], {}, "steps = 8\n"),
    ],
)
def test_every_layer_reaches_ask(tmp_path, how, args, env_extra, config):
    if config:
        write_config(tmp_path, config)
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), **env_extra)
    result = quicksilver(*args, "what is 6 times 7", env=env)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["steps"] == 8, how
    assert report["forward_passes"] == 8 + report.get("router_passes", 0), how


def test_ask_and_eval_refuse_bad_settings_before_loading_a_model(tmp_path):
    env = clean_env(XDG_CONFIG_HOME=str(tmp_path), QUICKSILVER_STEPS="banana")
    for args in (["ask", "hi"], ["eval", "--per-skill", "1"]):
        result = quicksilver(*args, env=env)
        assert result.returncode == 2 and "QUICKSILVER_STEPS" in result.stderr, args
    missing = tmp_path / "no-model-here"
    result = quicksilver("ask", "   ", "--model", str(missing), env=clean_env())
    assert result.returncode == 2 and "the question is empty" in result.stderr
