"""The fine-tuned Whisper (models/whisper_quicksilver): CTranslate2's model.bin read and
written exactly, the PyTorch decoder equal to CTranslate2's, an adapter merged into the
weights the way the training model applies it, the merged model built once and loaded
by faster-whisper, the registry name, and the training batches scoring only the
transcript."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from quicksilver.assistant.loading import load_transcriber, resolve_whisper_model
from quicksilver.audio.stt import Transcriber, bundled_model_path
from quicksilver.audio.synthetic_speech import as_utterance
from quicksilver.models.whisper_quicksilver.ct2_format import model_bytes, read_model
from quicksilver.models.whisper_quicksilver.decoder import LoraConfig, WhisperDecoder
from quicksilver.models.whisper_quicksilver.encoder import WhisperEncoder
from quicksilver.models.whisper_quicksilver.merge import ADAPTER, build_model, merge_adapter
from quicksilver.models.whisper_quicksilver.train import (
    LETTER_SKILLS,
    Recipe,
    batches,
    held_out_words,
    loss_of,
    model_folder,
    read_clips,
    target_text,
    vocabulary_words,
    with_any_word,
    write_clips,
)
from safetensors.numpy import save_file

QUESTION = "What is twelve plus nine?"


@pytest.fixture(scope="module")
def base():
    return read_model(bundled_model_path())


@pytest.fixture(scope="module")
def heard(espeak):
    """The encoder's output and the decoder prompt for a spoken question."""
    transcriber = Transcriber(device="cpu", cpu_threads=1)
    encoded = transcriber.short_window_encoding(as_utterance(espeak(QUESTION)))
    return transcriber, encoded, transcriber.decoder_prompt


def test_model_bin_round_trips_byte_for_byte(base):
    assert model_bytes(base) == (bundled_model_path() / "model.bin").read_bytes()
    assert base.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}


def test_a_cut_model_bin_is_a_clear_error(tmp_path):
    data = (bundled_model_path() / "model.bin").read_bytes()
    (tmp_path / "model.bin").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="ends early"):
        read_model(tmp_path)


def _greedy(decoder: WhisperDecoder, encoded: np.ndarray, prompt: list[int], eot: int) -> list[int]:
    tokens, audio = list(prompt), torch.from_numpy(encoded)[None]
    with torch.no_grad():
        for _ in range(30):
            following = int(decoder(torch.tensor([tokens]), audio)[0, -1].argmax())
            if following == eot:
                break
            tokens.append(following)
    return tokens[len(prompt) :]


def test_the_pytorch_decoder_reads_as_ctranslate2_does(base, heard):
    transcriber, encoded, prompt = heard
    eot = transcriber.model.hf_tokenizer.token_to_id("<|endoftext|>")
    ours = _greedy(WhisperDecoder(base).eval(), encoded, prompt, eot)
    import ctranslate2

    theirs = transcriber.model.model.generate(
        ctranslate2.StorageView.from_array(encoded[None]), [prompt], beam_size=1,
        max_length=len(prompt) + 30, suppress_blank=False, suppress_tokens=[],
    )[0].sequences_ids[0]  # fmt: skip
    assert ours == [t for t in theirs if t != eot]
    assert "12" in transcriber.model.hf_tokenizer.decode(ours)


def _random_adapter(decoder: WhisperDecoder) -> dict[str, np.ndarray]:
    generator = torch.Generator().manual_seed(0)
    adapter = {}
    for name, tensor in decoder.adapter_state().items():
        adapter[name] = (torch.randn(tensor.shape, generator=generator) * 0.05).numpy()
    return adapter


def test_a_merged_adapter_gives_the_adapted_model(base, heard):
    _, encoded, prompt = heard
    lora = LoraConfig(rank=4, alpha=8.0, dropout=0.0)
    adapted = WhisperDecoder(base, lora).eval()
    adapter = _random_adapter(adapted)
    adapted.load_adapter(adapter)
    merged = WhisperDecoder(merge_adapter(base, adapter, lora.alpha / lora.rank)).eval()
    plain = WhisperDecoder(base).eval()
    tokens, audio = torch.tensor([prompt]), torch.from_numpy(encoded)[None]
    with torch.no_grad():
        want, got, before = adapted(tokens, audio), merged(tokens, audio), plain(tokens, audio)
    assert (want - before).abs().max() > 0.5  # the adapter changes the model...
    assert (want - got).abs().max() < 0.05  # ...and merged, it changes it the same way


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_the_pytorch_encoder_hears_as_ctranslate2_does(base, heard, espeak):
    transcriber, encoded, _ = heard
    encoder = WhisperEncoder(base, LoraConfig(), adapted=2).eval()  # LoRA's B starts at 0
    features = transcriber.short_window_features(as_utterance(espeak(QUESTION)))
    with torch.no_grad():
        ours = encoder(torch.from_numpy(encoder.frozen(features))[None])[0].numpy()
    assert ours.shape == encoded.shape
    # CTranslate2 runs int8, whose kernels differ by CPU: close, not equal. On an AVX2-only
    # CPU one near-silent frame of a few hundred falls to a cosine of 0.86, so the bar is
    # on the bulk and on the whole: one frame off (a misaligned encoder) errs by 0.3.
    cosines = _cosines(ours, encoded)
    assert np.median(cosines) > 0.995 and np.percentile(cosines, 1) > 0.98
    assert np.linalg.norm(ours - encoded) / np.linalg.norm(encoded) < 0.1


def test_an_encoder_adapter_merges_into_ctranslate2s_encoder(base, heard, espeak, tmp_path):
    transcriber, encoded, _ = heard
    lora = LoraConfig(rank=4, alpha=8.0, dropout=0.0)
    encoder = WhisperEncoder(base, lora, adapted=1).eval()
    generator = torch.Generator().manual_seed(0)
    adapter = {name: (torch.randn(t.shape, generator=generator) * 0.1).numpy()
               for name, t in encoder.adapter_state().items()}  # fmt: skip
    assert {name.split("/")[1] for name in adapter} == {"layer_3"}  # the top block only
    for name, value in adapter.items():
        encoder.get_parameter(_attribute(name)).data = torch.from_numpy(value)
    features = transcriber.short_window_features(as_utterance(espeak(QUESTION)))
    with torch.no_grad():
        want = encoder(torch.from_numpy(encoder.frozen(features))[None])[0].numpy()
    (tmp_path / "model.bin").write_bytes(model_bytes(merge_adapter(base, adapter, 2.0)))
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        if (bundled_model_path() / name).is_file():
            (tmp_path / name).write_bytes((bundled_model_path() / name).read_bytes())
    got = Transcriber(str(tmp_path), device="cpu", cpu_threads=1).short_window_encoding(
        as_utterance(espeak(QUESTION))
    )
    changed, same = np.median(_cosines(want, encoded)), np.median(_cosines(want, got))
    assert changed < 0.99  # the adapter changes what is heard...
    assert same > 0.99 and 1 - same < 0.5 * (1 - changed)  # ...and merged, CTranslate2 too


def _attribute(name: str) -> str:
    """The encoder's parameter an adapter tensor sets: encoder/layer_3/ffn/linear_0/lora_a
    → blocks.3.ffn_in.lora_a."""
    from quicksilver.models.whisper_quicksilver.encoder import ENCODER_LINEARS

    _, layer, *linear, part = name.split("/")
    attribute = {v: k for k, v in ENCODER_LINEARS.items()}["/".join(linear)]
    return f"blocks.{layer.removeprefix('layer_')}.{attribute}.{part}"


def test_an_adapter_for_another_model_is_refused(base):
    layer_9 = "decoder/layer_9/ffn/linear_0"  # tiny.en has four decoder layers
    with pytest.raises(ValueError, match="does not fit"):
        merge_adapter(base, {f"{layer_9}/lora_a": np.zeros((4, 384)),
                             f"{layer_9}/lora_b": np.zeros((1536, 4))}, 2.0)  # fmt: skip
    out = "decoder/layer_0/ffn/linear_1"
    with pytest.raises(ValueError, match="the model's is"):
        merge_adapter(base, {f"{out}/lora_a": np.zeros((4, 1536)),
                             f"{out}/lora_b": np.zeros((1, 4))}, 2.0)  # fmt: skip


def test_the_merged_model_is_built_once_and_faster_whisper_runs_it(base, tmp_path, espeak):
    lora = LoraConfig(rank=4, alpha=8.0, dropout=0.0)
    adapter = {k: v * 0.01 for k, v in _random_adapter(WhisperDecoder(base, lora)).items()}
    save_file(adapter, str(tmp_path / "adapter.safetensors"))
    (tmp_path / "adapter.json").write_text('{"lora": {"rank": 4, "alpha": 8.0}}')
    cache = tmp_path / "cache"
    folder = build_model(bundled_model_path(), tmp_path / "adapter.safetensors",
                         tmp_path / "adapter.json", cache)  # fmt: skip
    built = (folder / "model.bin").stat().st_mtime_ns
    assert build_model(bundled_model_path(), tmp_path / "adapter.safetensors",
                       tmp_path / "adapter.json", cache) == folder  # fmt: skip
    assert (folder / "model.bin").stat().st_mtime_ns == built
    assert [p.name for p in cache.iterdir()] == [folder.name]  # no staging left behind
    text = Transcriber(folder, device="cpu", cpu_threads=1).transcribe(
        as_utterance(espeak(QUESTION))
    )
    assert "12 plus" in text  # (tiny.en itself hears "What is 12 plus I?")


def test_an_adapter_ships_at_its_strength(base, tmp_path):
    """``strength`` in adapter.json scales what the merge adds (the shipped one is < 1)."""
    lora = LoraConfig(rank=4, alpha=8.0, dropout=0.0)
    adapter = _random_adapter(WhisperDecoder(base, lora))
    save_file(adapter, str(tmp_path / "adapter.safetensors"))
    built = {}
    for strength in (1.0, 0.5):
        config = tmp_path / f"adapter-{strength}.json"
        config.write_text(json.dumps({"lora": {"rank": 4, "alpha": 8.0, "strength": strength}}))
        folder = build_model(bundled_model_path(), tmp_path / "adapter.safetensors", config,
                             tmp_path / "cache")  # fmt: skip
        built[strength] = (folder / "model.bin").read_bytes()
    assert built[0.5] == model_bytes(merge_adapter(base, adapter, 8.0 / 4 * 0.5))
    assert built[0.5] != built[1.0]


def test_a_read_only_cache_falls_back_to_the_temporary_folder(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    folder = build_model(bundled_model_path(), cache=blocked / "cache")
    assert folder.parent == tmp_path / "tmp" / "quicksilver-whisper"
    assert (folder / "model.bin").is_file() and (folder / "tokenizer.json").is_file()


def test_a_missing_adapter_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="reinstall quicksilver"):
        build_model(bundled_model_path(), tmp_path / "none.safetensors", tmp_path / "none.json")


def test_the_shipped_name_loads_the_fine_tuned_model(tmp_path, monkeypatch, espeak):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = resolve_whisper_model("tiny.en-quicksilver")
    assert folder.startswith(str(tmp_path)) and ADAPTER.is_file()
    assert resolve_whisper_model("tiny.en") == "tiny.en"  # other names pass through
    transcriber = load_transcriber("tiny.en-quicksilver", threads=1)
    text = transcriber.transcribe(as_utterance(espeak("What is forty plus two?")))
    assert "40" in text and "2" in text


@pytest.mark.parametrize(
    ("question", "heard_as"),
    [
        ("What date will it be in eighteen days?", "what date will it be in 18 days"),
        ("Calculate four hundred and fifty-five plus seven?", "calculate 455 plus 7"),
    ],
)
def test_the_shipped_model_hears_phrasings_it_never_trained_on(espeak, question, heard_as):
    """Held-out phrasings ("what date", "calculate" are in no training question): an
    adapter on the decoder wrote the trained "what day" and "count your"; the shipped
    encoder adapter leaves tiny.en's decoder, and its English, as they are."""
    transcriber = load_transcriber("tiny.en-quicksilver", threads=1)
    heard = transcriber.transcribe(as_utterance(espeak(question)))
    assert " ".join(re.findall(r"[a-z0-9]+", heard.lower())) == heard_as


def test_targets_are_written_as_whisper_writes_numbers():
    assert target_text("what is three hundred and five plus ninety?") == "What is 305 plus 90?"
    assert target_text(" how many r's are in strawberry") == "How many r's are in strawberry"


def test_letter_questions_can_be_asked_about_any_word_never_a_held_out_one():
    import random
    import re

    from quicksilver.models.reasoner_tiny.corpus import WORDS, is_held_out, training_items

    words = vocabulary_words()
    assert {"instr", "satisf", "thousand"}.isdisjoint(words)  # pieces and numbers are not
    assert {"garden", "purple", "thunder"} <= set(words)  # said words; none held out:
    assert not any(is_held_out("word:" + w) for w in words) and held_out_words().isdisjoint(words)
    items = training_items(400, seed=3, augment=False)
    rng = random.Random(0)
    every = [with_any_word(item, rng, Recipe(word_share=1.0)) for item in items]
    none = [with_any_word(item, rng, Recipe(word_share=0.0)) for item in items]
    assert none == items
    asked_words = []
    for before, after in zip(items, every, strict=True):
        assert after.skill == before.skill
        if before.skill not in LETTER_SKILLS:
            assert after is before
            continue
        asked = re.match(r"(\w+) (?:is spelled|backwards is|has (?:\d+|no) )", after.answer)
        asked = asked or re.search(r" of (\w+) is [A-Z]\.$", after.answer)  # first/last
        asked_words.append(asked.group(1).lower())
        assert asked_words[-1] in words and asked_words[-1] in after.question.lower()
    assert len(asked_words) > 50 and len(set(asked_words) - set(WORDS)) > 0.9 * len(asked_words)


def test_training_batches_score_the_transcript_and_nothing_else(base):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    eot = tokenizer.token_to_id("<|endoftext|>")
    clips = [(np.zeros((40, 384), np.float16), "What is 2 plus 2?", "a"),
             (np.zeros((60, 384), np.float16), "Spell cat.", "b")]  # fmt: skip
    prompt = [50360, 1867, 50257]  # any three tokens stand for the prompt
    recipe = Recipe(batch_size=2, no_prompt_share=0.0)
    tokens, audio, mask, weight = next(batches(clips, recipe, 0, (prompt, prompt), tokenizer, eot))
    assert audio.shape == (2, 60, 384) and mask[..., :40].all() and mask.sum() == 100
    for row in range(2):
        scored = tokens[row, 1:][weight[row, :-1].bool()].tolist()
        assert scored[-1] == eot
        assert tokenizer.decode(scored[:-1]).strip() in ("What is 2 plus 2?", "Spell cat.")
    torch.manual_seed(0)  # the adapter starts at random: unseeded, 1 run in 6 here diverged
    model = WhisperDecoder(base, LoraConfig(rank=4, alpha=8.0, dropout=0.0))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    first = loss_of(model, None, tokens, audio, mask, weight)
    for _ in range(10):  # the adapter alone can learn a batch
        optimizer.zero_grad()
        loss_of(model, None, tokens, audio, mask, weight).backward()
        optimizer.step()
    assert loss_of(model, None, tokens, audio, mask, weight).item() < 0.5 * first.item()


def test_a_recipe_adapts_the_whisper_model_it_names_and_keeps_its_clips_apart(tmp_path):
    """The model a recipe names hears its clips and is the one adapted, so a clip set
    encoded by one model (tiny.en's 384 columns) is refused by a recipe for another."""
    assert model_folder("tiny.en") == bundled_model_path()
    base = tmp_path / "whisper-base"
    base.mkdir()
    with pytest.raises(FileNotFoundError, match="not a CTranslate2 Whisper folder"):
        model_folder(str(base))  # nor would a hub name be: its weights are read here
    (base / "model.bin").write_bytes(b"")
    assert model_folder(str(base)) == base
    tiny, other = Recipe(), Recipe(whisper=str(base))
    assert tiny.clip_kind == "encoder-below-2" and other.clip_kind != tiny.clip_kind
    assert Recipe(encoder_layers=0).clip_kind == "encoded"  # a decoder adapter's clips
    stored = tmp_path / "clips.npz"
    write_clips(stored, [(np.zeros((40, 384), np.float16), "Spell cat.", "a")], tiny.clip_kind)
    assert read_clips(stored, tiny.clip_kind)[0][1] == "Spell cat."
    with pytest.raises(ValueError, match="whisper-base"):
        read_clips(stored, other.clip_kind)
