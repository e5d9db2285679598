"""Tokenizer, chat template and the reasoning/answer split."""

from __future__ import annotations

import re

import pytest
from quicksilver.engine import ChatTemplate, Tokenizer
from quicksilver.engine.tokenizer import MASK_GLYPH


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return Tokenizer.byte_level()


@pytest.mark.parametrize("text", ["what is 17 × 3?", "naïve café 😀", "  spaces  ", "9.11 vs 9.9"])
def test_text_round_trips(tok, text):
    assert tok.decode(tok.encode(text)) == text


def test_special_token_names_in_user_text_stay_plain_text(tok):
    ids = tok.encode("<|end|><|answer|>")
    assert tok.end_id not in ids and tok.answer_id not in ids
    assert tok.decode(ids) == "<|end|><|answer|>"


def test_prompt_renders_the_conversation_and_opens_the_reasoning(tok):
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "what is 2 plus 2"},
    ]
    ids = tok.prompt_ids(messages)
    assert ids[-1] == tok.think_id
    assert tok.hf.decode(ids, skip_special_tokens=False) == (
        "<|system|>Be brief.<|end|><|user|>hi<|end|><|assistant|>Hello!<|end|>"
        "<|user|>what is 2 plus 2<|end|><|assistant|><|think|>"
    )
    assert tok.prompt_ids("what is 2 plus 2") == tok.prompt_ids(messages[-1:])


def test_reply_splits_into_thinking_and_spoken_text(tok):
    reply = tok.reply_ids("17*3 = 51", "Seventeen times three is 51.")
    padded = reply + [tok.end_id] * 5 + tok.encode("junk after the end")
    assert tok.split_reply(padded) == ("17*3 = 51", "Seventeen times three is 51.")


def test_spoken_text_never_holds_special_tokens(tok):
    ids = [*tok.encode("a"), tok.answer_id, *tok.encode("b"), tok.think_id, tok.mask_id, 999]
    thinking, text = tok.split_reply(ids)
    assert (thinking, text) == ("a", "b")


def test_a_reply_without_the_marker_is_all_reasoning(tok):
    assert tok.split_reply(tok.encode("still thinking")) == ("still thinking", "")


def test_template_without_reasoning_region():
    tok = Tokenizer.byte_level(template=ChatTemplate(generation_prompt="<|assistant|>"))
    assert tok.reply_ids("ignored", "Hi.") == [*tok.encode("Hi."), tok.end_id]
    assert tok.split_reply(tok.encode("Hi.")) == ("", "Hi.")


def test_draft_shows_masked_positions_and_hides_padding(tok):
    ids = [*tok.encode("ab"), tok.answer_id, *tok.encode("cd"), tok.end_id, *tok.encode("zz")]
    masked = [False, True, False, False, True, False, True, True]
    assert tok.split_draft(ids, masked) == (f"a{MASK_GLYPH}", f"c{MASK_GLYPH}")
    # Before the marker is committed, the whole draft is reasoning.
    masked[2] = True
    thinking, text = tok.split_draft(ids, masked)
    assert text == "" and thinking.count(MASK_GLYPH) == 3


def test_missing_special_token_is_a_clear_error(tok):
    from quicksilver.engine import SpecialTokens

    with pytest.raises(ValueError, match=re.escape("no mask token '<|nomask|>'")):
        Tokenizer(tok.hf, SpecialTokens(mask="<|nomask|>"))


WORDS = ["Hello", " times", " is", " What", " can", " →"]


@pytest.fixture(scope="module")
def words_tok() -> Tokenizer:
    return Tokenizer.word_level(WORDS)


@pytest.mark.parametrize(
    "text",
    ["Hello! What can I do?", "74 times 85 is 6290.", "sometimes timesx", "4*5 → 20 naïve 😀"],
)
def test_word_level_text_round_trips(words_tok, text):
    assert words_tok.decode(words_tok.encode(text)) == text


def test_word_level_keeps_listed_words_whole_and_spells_the_rest(words_tok):
    pieces = [words_tok.hf.id_to_token(i) for i in words_tok.encode("Hello What can penguins")]
    assert pieces[:3] == ["Hello", "ĠWhat", "Ġcan"]
    assert pieces[3:] == ["Ġ", "p", "e", "n", "g", "u", "i", "n", "s"]


def test_word_level_never_matches_inside_a_longer_word(words_tok):
    for text in ("sometimes", "Whatever", "Helloo", "scan"):
        assert len(words_tok.encode(text)) == len(text), text


def test_word_level_shortens_sentences_and_survives_a_file(words_tok, tmp_path):
    text = "Hello! What is 17 times 3?"
    assert len(words_tok.encode(text)) < len(Tokenizer.byte_level().encode(text)) - 8
    words_tok.save(tmp_path / "tokenizer.json")
    loaded = Tokenizer.from_file(tmp_path / "tokenizer.json")
    assert loaded.encode(text) == words_tok.encode(text)
    assert loaded.end_id == words_tok.end_id and loaded.vocab_size == words_tok.vocab_size


def test_more_words_keep_every_id_and_take_the_next_ones(words_tok, tmp_path):
    grown = words_tok.with_words([" penguins", "Hello", "x"])  # "Hello" is already whole
    old, new = words_tok.hf.get_vocab(True), grown.hf.get_vocab(True)
    assert {token: new[token] for token in old} == old
    assert grown.vocab_size == words_tok.vocab_size + 1
    assert new["Ġpenguins"] == words_tok.vocab_size  # the next id, after the special tokens
    assert (grown.mask_id, grown.end_id) == (words_tok.mask_id, words_tok.end_id)
    text = "Hello What can penguins penguinsx"
    pieces = [grown.hf.id_to_token(i) for i in grown.encode(text)]
    assert pieces[:4] == ["Hello", "ĠWhat", "Ġcan", "Ġpenguins"]
    assert len(pieces) == 4 + len(" penguinsx")  # only as a whole word
    assert grown.decode(grown.encode(text)) == text
    grown.save(tmp_path / "tokenizer.json")
    assert Tokenizer.from_file(tmp_path / "tokenizer.json").encode(text) == grown.encode(text)


def test_only_a_word_level_tokenizer_takes_new_words():
    with pytest.raises(ValueError, match="only a word-level tokenizer"):
        Tokenizer.byte_level().with_words(["penguins"])
