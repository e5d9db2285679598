"""A checkpoint names its prompt preparation; the engine finds it through entry points."""

from __future__ import annotations

import dataclasses
import datetime
import json
from importlib.metadata import EntryPoint

import pytest
from quicksilver.engine import ChatTemplate, Engine, Tokenizer
from quicksilver.engine import preparation as preparation_module
from quicksilver.engine.checkpoints import CheckpointConfig
from quicksilver.engine.model import ModelConfig

from .conftest import tiny_config


class Shouting:
    """A preparation for the tests: user text upper-cased, the date in ISO form."""

    def prepare(self, messages, tokenizer):
        return [
            {**m, "content": m["content"].upper()} if m["role"] == "user" else dict(m)
            for m in messages
        ]

    def date_context(self, today):
        return f"DAY {today.isoformat()}"


SHOUTING = Shouting()


@pytest.fixture
def registered(monkeypatch):
    """``shouting`` registered under the engine's entry-point group, nothing else."""
    point = EntryPoint(
        name="shouting",
        value=f"{__name__}:SHOUTING",
        group=preparation_module.ENTRY_POINTS,
    )
    monkeypatch.setattr(
        preparation_module,
        "entry_points",
        lambda group: [point] if group == preparation_module.ENTRY_POINTS else [],
    )


def test_a_named_preparation_shapes_the_prompt_date_and_count(registered, tmp_path):
    template = ChatTemplate(preparation="shouting")
    engine = Engine.random(tiny_config(), tokenizer=Tokenizer.byte_level(template=template))
    conversation = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "what is two plus two"},
    ]
    rendered = engine.tokenizer.hf.decode(engine.tokenizer.prompt_ids(conversation))
    assert "WHAT IS TWO PLUS TWO" in rendered and "be brief" in rendered
    assert conversation[1]["content"] == "what is two plus two"  # the caller's list untouched
    assert engine.count_prompt_tokens(conversation) == len(
        engine.tokenizer.prompt_ids(conversation)
    )
    assert engine.date_context(datetime.date(2026, 12, 2)) == "DAY 2026-12-02"

    engine.save(tmp_path / "ckpt")
    saved = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert saved["chat_template"]["preparation"] == "shouting"
    loaded = Engine.load(tmp_path / "ckpt")
    assert loaded.tokenizer.preparation is SHOUTING
    assert loaded.tokenizer.prompt_ids(conversation) == engine.tokenizer.prompt_ids(conversation)


def test_without_a_preparation_the_text_is_as_given_and_no_date_is_told():
    engine = Engine.random(tiny_config())
    assert engine.tokenizer.preparation is None
    assert engine.date_context(datetime.date(2026, 12, 2)) is None
    question = "What's Seventeen times 3?"
    assert question in engine.tokenizer.hf.decode(engine.tokenizer.prompt_ids(question))
    markup = len(engine.tokenizer.prompt_ids("x")) - 1
    assert engine.count_prompt_tokens(question) == markup + len(question.encode())


def test_an_unknown_preparation_says_what_to_install(registered, tmp_path):
    engine = Engine.random(tiny_config())
    engine.save(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    config["chat_template"]["preparation"] = "no-such-model"
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"prompt preparation 'no-such-model'.*quicksilver\.prompt_preparations.*"
        r"shouting.*pip install",
    ):
        Engine.load(tmp_path / "ckpt")


@pytest.mark.parametrize(
    ("switches", "name"),
    [
        ({"normalise_user_text": True, "operand_slots": True}, "reasoner-tiny"),
        ({"normalise_user_text": True, "operand_slots": False}, "reasoner-tiny-before-slots"),
        ({"normalise_user_text": True}, "reasoner-tiny-before-slots"),
        ({"normalise_user_text": False, "operand_slots": False}, None),
    ],
)
def test_config_files_with_the_old_switches_name_the_preparation_they_meant(
    tmp_path, switches, name
):
    """Build folders written before preparations had names keep their prompts."""
    data = CheckpointConfig(ModelConfig(vocab_size=300)).to_dict()
    del data["chat_template"]["preparation"]
    data["chat_template"].update(switches)
    template = CheckpointConfig.from_dict(data, tmp_path / "config.json").chat_template
    assert template == dataclasses.replace(ChatTemplate(), preparation=name)


def test_slots_without_normalisation_were_never_a_preparation(tmp_path):
    data = CheckpointConfig(ModelConfig(vocab_size=300)).to_dict()
    data["chat_template"]["operand_slots"] = True
    with pytest.raises(ValueError, match="operand_slots without normalise_user_text"):
        CheckpointConfig.from_dict(data, tmp_path / "config.json")
