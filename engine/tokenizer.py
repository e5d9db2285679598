"""Tokenizer, chat template and the reply canvas's reasoning/answer regions.

Text ↔ ids goes through Hugging Face ``tokenizers`` (a ``tokenizer.json``). The chat
template renders a conversation into the prompt; the generation prompt opens the
hidden reasoning region, so a reply canvas reads::

    reasoning … <|answer|> spoken answer … <|end|> <|end|> …

and everything after the first end token is padding.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import tokenizers
from tokenizers import Regex, decoders, models, pre_tokenizers

from .preparation import PromptPreparation, load_preparation

Message = dict[str, str]
Conversation = str | Sequence[Message]

MASK_GLYPH = "░"  # how a still-masked position shows in a streamed draft
ROLES = ("system", "user", "assistant")


@dataclass
class SpecialTokens:
    """Names of the tokens the engine gives a meaning to."""

    mask: str = "<|mask|>"
    end: str = "<|end|>"
    # The reasoning and answer markers; None for a model that writes its answer only
    # (the open checkpoints of engine.hub).
    think: str | None = "<|think|>"
    answer: str | None = "<|answer|>"


@dataclass
class ChatTemplate:
    """How messages become a prompt. ``{content}`` marks where each message's text goes.

    Earlier assistant turns are rendered with their spoken text only; their reasoning
    is not carried into the next prompt. ``preparation`` names the model's own prompt
    preparation (see :mod:`engine.preparation`), applied to the messages first.
    """

    bos: str = ""
    system: str = "<|system|>{content}<|end|>"
    user: str = "<|user|>{content}<|end|>"
    assistant: str = "<|assistant|>{content}<|end|>"
    generation_prompt: str = "<|assistant|><|think|>"
    preparation: str | None = None


def byte_level_tokenizer(
    specials: SpecialTokens, extra_special: Sequence[str] = ()
) -> tokenizers.Tokenizer:
    """A tokenizer with one token per byte (no merges) plus the special tokens.

    Works for any text without an unknown token; a fresh model trained on it sees
    every character, which small reasoning models need for digits and spelling.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    tok = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    _add_specials(tok, specials, extra_special)
    return tok


def word_level_tokenizer(
    specials: SpecialTokens, words: Sequence[str], extra_special: Sequence[str] = ()
) -> tokenizers.Tokenizer:
    """Whole-word tokens for ``words``, one token per byte for everything else.

    A small model's canvas shrinks about threefold when the sentences it always says
    are a few tokens each, while digits and any word outside the list (a word to
    spell, a name) stay single characters it can copy and reason over. ``words`` may
    start with a space (" times"); a word only matches as a whole word.
    """
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    mapped = sorted(_byte_level_words(words), key=len, reverse=True)
    vocab = {symbol: i for i, symbol in enumerate([*alphabet, *mapped])}
    tok = tokenizers.Tokenizer(models.WordLevel(vocab=vocab, unk_token=alphabet[0]))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [_BYTE_MAP, pre_tokenizers.Split(Regex(_split_pattern(mapped)), behavior="isolated")]
    )
    tok.decoder = decoders.ByteLevel()
    _add_specials(tok, specials, extra_special)
    return tok


_BYTE_MAP = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


def _byte_level_words(words: Sequence[str]) -> list[str]:
    """``words`` as the byte-level alphabet writes them, each once, single characters
    and words with a space inside left out."""
    mapped = []
    for word in dict.fromkeys(words):
        pieces = _BYTE_MAP.pre_tokenize_str(word)
        if len(word) > 1 and len(pieces) == 1:
            mapped.append(pieces[0][0])
    return mapped


def _split_pattern(mapped: Sequence[str]) -> str:
    """The pre-tokenizer's split: each whole word, the longest first, else one character."""
    return "|".join([*(_whole_word(m) for m in sorted(mapped, key=len, reverse=True)), "."])


def with_more_words(hf: tokenizers.Tokenizer, words: Sequence[str]) -> tokenizers.Tokenizer:
    """A word-level tokenizer that also keeps ``words`` whole; every id it had keeps its
    meaning and the new words take the ids after the last one, so a trained model can
    grow into it (see :meth:`engine.Engine.with_words`)."""
    data = json.loads(hf.to_str())
    steps = (data.get("pre_tokenizer") or {}).get("pretokenizers") or []
    if data["model"]["type"] != "WordLevel" or len(steps) != 2 or steps[1]["type"] != "Split":
        raise ValueError(
            "only a word-level tokenizer (Tokenizer.word_level) can take new whole words"
        )
    vocab: dict[str, int] = data["model"]["vocab"]
    # Special tokens join the word list at their ids: added tokens the model's vocabulary
    # lacks are numbered after it, which would move them past the new words.
    specials = {token["content"]: token["id"] for token in data["added_tokens"]}
    vocab.update(specials)
    next_id = hf.get_vocab_size(with_added_tokens=True)
    for symbol in _byte_level_words(words):
        if symbol not in vocab:
            vocab[symbol], next_id = next_id, next_id + 1
    whole = [symbol for symbol in vocab if len(symbol) > 1 and symbol not in specials]
    steps[1]["pattern"] = {"Regex": _split_pattern(whole)}
    return tokenizers.Tokenizer.from_str(json.dumps(data))


def _whole_word(word: str) -> str:
    """A regex for ``word`` that does not match inside a longer word."""
    before = "(?<![A-Za-z])" if re.match("[A-Za-z]", word[0]) else ""
    after = "(?![A-Za-z])" if re.match("[A-Za-z]", word[-1]) else ""
    return before + re.escape(word) + after


def _add_specials(
    tok: tokenizers.Tokenizer, specials: SpecialTokens, extra_special: Sequence[str]
) -> None:
    template_specials = ["<|system|>", "<|user|>", "<|assistant|>"]
    names = [name for name in asdict(specials).values() if name is not None]
    names += [*template_specials, *extra_special]
    tok.add_special_tokens(list(dict.fromkeys(names)))


class Tokenizer:
    """``tokenizers.Tokenizer`` plus the engine's special tokens and chat template."""

    def __init__(
        self,
        hf: tokenizers.Tokenizer,
        specials: SpecialTokens | None = None,
        template: ChatTemplate | None = None,
    ) -> None:
        self.hf = hf
        self.specials = specials or SpecialTokens()
        self.template = template or ChatTemplate()
        ids: dict[str, int | None] = {"think": None, "answer": None}
        for role, name in asdict(self.specials).items():
            if name is None and role in ids:
                continue
            token_id = hf.token_to_id(name)
            if token_id is None:
                raise ValueError(
                    f"tokenizer.json has no {role} token {name!r}; add it as a special token "
                    "or name the right one under config.json['special_tokens']"
                )
            ids[role] = token_id
        self.mask_id, self.end_id = ids["mask"], ids["end"]
        self.think_id, self.answer_id = ids["think"], ids["answer"]
        self.vocab_size = hf.get_vocab_size(with_added_tokens=True)
        think = self.specials.think
        self.starts_in_reasoning = bool(think) and self.template.generation_prompt.endswith(think)
        name = self.template.preparation
        self.preparation: PromptPreparation | None = load_preparation(name) if name else None
        self._spelled: dict[str, bool] = {}

    @classmethod
    def byte_level(
        cls, specials: SpecialTokens | None = None, template: ChatTemplate | None = None
    ) -> Tokenizer:
        specials = specials or SpecialTokens()
        return cls(byte_level_tokenizer(specials), specials, template)

    @classmethod
    def word_level(
        cls,
        words: Sequence[str],
        specials: SpecialTokens | None = None,
        template: ChatTemplate | None = None,
    ) -> Tokenizer:
        specials = specials or SpecialTokens()
        return cls(word_level_tokenizer(specials, words), specials, template)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        specials: SpecialTokens | None = None,
        template: ChatTemplate | None = None,
    ) -> Tokenizer:
        return cls(tokenizers.Tokenizer.from_file(str(path)), specials, template)

    def with_words(self, words: Sequence[str]) -> Tokenizer:
        """This tokenizer keeping ``words`` whole as well, every existing id unchanged."""
        return Tokenizer(with_more_words(self.hf, words), self.specials, self.template)

    def with_preparation(self, name: str | None) -> Tokenizer:
        """This tokenizer preparing its prompts with the preparation registered as
        ``name`` (None: none), for training a model to read another prompt form."""
        return Tokenizer(self.hf, self.specials, replace(self.template, preparation=name))

    def save(self, path: str | Path) -> None:
        self.hf.save(str(path))

    def fingerprint(self) -> str:
        """A digest of what ids mean (vocabulary, special tokens, chat template), the
        same across ``tokenizers`` versions, whose saved JSON differs in detail."""
        vocab = sorted(self.hf.get_vocab(with_added_tokens=True).items())
        described = [vocab, asdict(self.specials), asdict(self.template)]
        return hashlib.sha256(json.dumps(described).encode()).hexdigest()

    # ------------------------------------------------------------------ text ↔ ids

    def encode(self, text: str) -> list[int]:
        """Ids of user-supplied text; special-token names in it stay plain text."""
        self.hf.encode_special_tokens = True
        try:
            return self.hf.encode(text, add_special_tokens=False).ids
        finally:
            self.hf.encode_special_tokens = False

    def _encode_markup(self, markup: str) -> list[int]:
        """Ids of template text, whose special-token names are meant as special tokens."""
        return self.hf.encode(markup, add_special_tokens=False).ids if markup else []

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ids, without special tokens or ids outside the vocabulary."""
        kept = [i for i in ids if 0 <= i < self.vocab_size]
        return self.hf.decode(kept, skip_special_tokens=True)

    # ------------------------------------------------------------------ chat

    def prompt_ids(self, conversation: Conversation) -> list[int]:
        """The prompt for a question or a list of ``{"role", "content"}`` messages, after
        the model's own preparation."""
        messages = normalise_conversation(conversation)
        if self.preparation is not None:
            messages = self.preparation.prepare(messages, self)
        ids = self._encode_markup(self.template.bos)
        for message in messages:
            ids += self._render(getattr(self.template, message["role"]), message["content"])
        return ids + self._encode_markup(self.template.generation_prompt)

    def spells_out(self, word: str) -> bool:
        """Whether ``word`` reaches the model letter by letter rather than as one token."""
        if word not in self._spelled:
            self._spelled[word] = len(self.encode(" " + word)) > 2
        return self._spelled[word]

    def _render(self, pattern: str, content: str) -> list[int]:
        before, _, after = pattern.partition("{content}")
        return self._encode_markup(before) + self.encode(content) + self._encode_markup(after)

    def reply_ids(self, thinking: str, text: str) -> list[int]:
        """The canvas a model should produce: reasoning, answer marker, answer, end."""
        reasoning = [*self.encode(thinking), self.answer_id] if self.starts_in_reasoning else []
        return reasoning + self.encode(text) + [self.end_id]

    def split_reply(self, ids: Sequence[int]) -> tuple[str, str]:
        """(thinking, text) of a finished canvas: cut at the end token, split at the marker."""
        ids = list(ids)
        if self.end_id in ids:
            ids = ids[: ids.index(self.end_id)]
        if self.answer_id in ids:
            cut = ids.index(self.answer_id)
            return self.decode(ids[:cut]).strip(), self.decode(ids[cut + 1 :]).strip()
        if self.starts_in_reasoning:
            return self.decode(ids).strip(), ""
        return "", self.decode(ids).strip()

    def answer_span(self, ids: Sequence[int]) -> slice:
        """Where a finished canvas's spoken answer lies, its end token included: after
        the answer marker up to the first end token (the whole reply when there is no
        marker). The end token counts: where the answer stops is part of what it says."""
        ids = list(ids)
        end = ids.index(self.end_id) + 1 if self.end_id in ids else len(ids)
        if self.answer_id in ids[:end]:
            return slice(ids.index(self.answer_id) + 1, end)
        return slice(0, end)

    def split_draft(self, ids: Sequence[int], masked: Sequence[bool]) -> tuple[str, str]:
        """(thinking, text) of a canvas mid-denoising, masked positions as ``MASK_GLYPH``.

        Positions after a committed end token are padding and not shown. Until the
        answer marker is committed, the draft counts as reasoning when the canvas
        starts in the reasoning region.
        """
        ids, masked = list(ids), list(masked)
        for i, (token, hidden) in enumerate(zip(ids, masked, strict=True)):
            if token == self.end_id and not hidden:
                ids, masked = ids[:i], masked[:i]
                break
        committed = (i for i, hidden in enumerate(masked) if not hidden)
        marker = next((i for i in committed if ids[i] == self.answer_id), None)
        if marker is None:
            draft = self._render_draft(ids, masked)
            return (draft, "") if self.starts_in_reasoning else ("", draft)
        return (
            self._render_draft(ids[:marker], masked[:marker]),
            self._render_draft(ids[marker + 1 :], masked[marker + 1 :]),
        )

    def _render_draft(self, ids: list[int], masked: list[bool]) -> str:
        pieces, run = [], []
        for token, hidden in zip(ids, masked, strict=True):
            if hidden:
                if run:
                    pieces.append(self.decode(run))
                    run = []
                pieces.append(MASK_GLYPH)
            else:
                run.append(token)
        if run:
            pieces.append(self.decode(run))
        return "".join(pieces).strip()


def normalise_conversation(conversation: Conversation) -> list[Message]:
    """Check a question or message list and return it as messages; clear errors if bad."""
    if isinstance(conversation, str):
        conversation = [{"role": "user", "content": conversation}]
    messages = list(conversation)
    if not messages:
        raise ValueError("the conversation is empty; pass a question or a list of messages")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise ValueError(
                f"message {i} must be a dict with 'role' and 'content', got {message!r}"
            )
        if message["role"] not in ROLES:
            raise ValueError(f"message {i} has role {message['role']!r}; use one of {ROLES}")
    if messages[-1]["role"] != "user":
        raise ValueError("the last message must be the user's question (role 'user')")
    if not messages[-1]["content"].strip():
        raise ValueError("the question is empty; say or type something to answer")
    return messages
