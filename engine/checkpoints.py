"""Quicksilver's checkpoint format: one folder with three files.

* ``config.json``: the model shape (:class:`~engine.model.ModelConfig`), the special
  tokens, the chat template, the default sampler settings and what its answers'
  confidence means (:class:`AnswerSettings`);
* ``model.safetensors``: the weights (any float dtype; loaded into the runtime dtype);
* ``tokenizer.json``: a Hugging Face ``tokenizers`` file.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from importlib.metadata import entry_points
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from . import hub
from .model import ModelConfig, Transformer
from .sampler import SamplerConfig
from .tokenizer import ChatTemplate, SpecialTokens, Tokenizer

ENTRY_POINTS = "quicksilver.checkpoints"
FORMAT = "quicksilver-dllm"
FORMAT_VERSION = 1
CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE = "config.json", "model.safetensors", "tokenizer.json"


@dataclass
class AnswerSettings:
    """How far this model's answers can be trusted: ``unsure_below`` is the
    :attr:`~engine.api.Answer.confidence` under which an answer is more likely wrong than
    worth saying, measured for this model on validation items at its default sampler
    settings (None: never measured, so no answer is called unsure)."""

    unsure_below: float | None = None

    def __post_init__(self) -> None:
        if self.unsure_below is not None and not 0.0 <= self.unsure_below <= 1.0:
            raise ValueError(f"unsure_below must lie in [0, 1] or be null, got {self.unsure_below}")


@dataclass
class CheckpointConfig:
    """Everything in ``config.json``."""

    model: ModelConfig
    special_tokens: SpecialTokens = field(default_factory=SpecialTokens)
    chat_template: ChatTemplate = field(default_factory=ChatTemplate)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    answer: AnswerSettings = field(default_factory=AnswerSettings)

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model": self.model.to_dict(),
            "special_tokens": asdict(self.special_tokens),
            "chat_template": asdict(self.chat_template),
            "sampler": asdict(self.sampler),
            "answer": asdict(self.answer),
        }

    @classmethod
    def from_dict(cls, data: dict, source: Path) -> CheckpointConfig:
        if data.get("format") != FORMAT:
            raise ValueError(
                f"{source} is not a Quicksilver checkpoint (format {data.get('format')!r}, "
                f"expected {FORMAT!r}); convert it or point to a Quicksilver checkpoint folder"
            )
        if data.get("format_version", 0) > FORMAT_VERSION:
            raise ValueError(
                f"{source} uses checkpoint format version {data['format_version']}, newer than "
                f"this Quicksilver reads ({FORMAT_VERSION}); "
                "upgrade with `pip install -U quicksilver`"
            )
        try:
            return cls(
                model=ModelConfig.from_dict(data["model"]),
                special_tokens=_build(SpecialTokens, data.get("special_tokens", {}), source),
                chat_template=_build(ChatTemplate, _named_preparation(data, source), source),
                sampler=_build(SamplerConfig, data.get("sampler", {}), source),
                answer=_build(AnswerSettings, data.get("answer", {}), source),
            )
        except KeyError as missing:
            raise ValueError(
                f"{source} lacks the setting {missing}; re-save the checkpoint"
            ) from None


# config.json files written before preparations were named carry reasoner-tiny's two
# switches instead; each combination its builds used maps to the preparation it meant.
LEGACY_PREPARATIONS = {
    (False, False): None,
    (True, False): "reasoner-tiny-before-slots",
    (True, True): "reasoner-tiny",
}


def _named_preparation(data: dict, source: Path) -> dict:
    """``data["chat_template"]``, its legacy switches (if any) turned into a preparation name."""
    template = dict(data.get("chat_template", {}))
    if not {"normalise_user_text", "operand_slots"} & set(template):
        return template
    switches = (
        bool(template.pop("normalise_user_text", False)),
        bool(template.pop("operand_slots", False)),
    )
    if switches not in LEGACY_PREPARATIONS:
        raise ValueError(
            f"{source}: operand_slots without normalise_user_text is no prompt preparation "
            "a model was trained with; name one under chat_template.preparation"
        )
    template.setdefault("preparation", LEGACY_PREPARATIONS[switches])
    return template


def _build(cls, data: dict, source: Path):
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{source}: unknown {cls.__name__} settings {unknown}")
    return cls(**data)


def save_checkpoint(
    folder: str | Path,
    model: Transformer,
    tokenizer: Tokenizer,
    sampler: SamplerConfig | None = None,
    dtype: torch.dtype | None = None,
    answer: AnswerSettings | None = None,
) -> Path:
    """Write a checkpoint folder; ``dtype`` (e.g. ``torch.float16``) shrinks the weights."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = CheckpointConfig(
        model.config,
        tokenizer.specials,
        tokenizer.template,
        sampler or SamplerConfig(),
        answer or AnswerSettings(),
    )
    state = {}
    for name, tensor in model.state_dict().items():
        if name == "lm_head.weight" and model.config.tie_embeddings:
            continue  # the same tensor as embed.weight
        tensor = tensor.detach().to("cpu")
        state[name] = (tensor.to(dtype) if dtype is not None else tensor).contiguous()
    save_file(state, str(folder / WEIGHTS_FILE), metadata={"format": FORMAT})
    tokenizer.save(folder / TOKENIZER_FILE)
    (folder / CONFIG_FILE).write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    return folder


def update_config(folder: str | Path, section: str, values: dict) -> None:
    """Set ``values`` in one section of ``folder``'s ``config.json`` and change nothing
    else: a setting chosen after training (the sampler, the unsure threshold) stored
    without saving the weights again."""
    path = Path(folder) / CONFIG_FILE
    config = json.loads(path.read_text())
    config[section] = {**config.get(section, {}), **values}
    path.write_text(json.dumps(config, indent=2) + "\n")


def resolve_checkpoint(spec: str | Path) -> Path:
    """A checkpoint folder from a path or a registered name such as ``"bundled"``.

    Names come from the ``quicksilver.checkpoints`` entry points: installed packages
    register the models they ship, and the engine needs to import none of them.
    """
    path = Path(spec).expanduser()
    if path.exists() or isinstance(spec, Path):
        return path
    registered = {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}
    if spec in registered:
        return Path(registered[spec].load()())
    if hub.HUB_ID.fullmatch(str(spec)):
        return hub.download(str(spec))
    names = ", ".join(sorted(registered)) or "none installed"
    raise FileNotFoundError(
        f"no checkpoint folder at {spec}; pass a folder holding {CONFIG_FILE}, {WEIGHTS_FILE} "
        f"and {TOKENIZER_FILE}, a registered name ({names}) or a Hugging Face id (owner/name)"
    )


def load_checkpoint(
    spec: str | Path,
) -> tuple[CheckpointConfig, dict[str, torch.Tensor], Tokenizer]:
    """Read and check a checkpoint folder (a path, a registered name or a hub id); a
    Hugging Face-layout folder (LLaDA, Qwen-layout MDLMs) is read through ``engine.hub``."""
    folder = resolve_checkpoint(spec)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no checkpoint folder at {folder}; pass a folder holding {CONFIG_FILE}, "
            f"{WEIGHTS_FILE} and {TOKENIZER_FILE}"
        )
    if hub.is_hub_folder(folder):
        _require(folder, (CONFIG_FILE, TOKENIZER_FILE))
        model, specials, template, state = hub.read_hub_checkpoint(folder)
        config = CheckpointConfig(model, specials, template)
    else:
        _require(folder, (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE))
        config, state = _read_own_format(folder)
    try:
        tokenizer = Tokenizer.from_file(
            folder / TOKENIZER_FILE, config.special_tokens, config.chat_template
        )
    except Exception as error:  # tokenizers raises a bare Exception on a malformed file
        if isinstance(error, ValueError):
            raise
        raise ValueError(
            f"{folder / TOKENIZER_FILE} cannot be read ({error}); re-save the checkpoint"
        ) from None
    check_weights(config.model, state, folder)
    if tokenizer.vocab_size > config.model.vocab_size:
        raise ValueError(
            f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens but the model only "
            f"{config.model.vocab_size}; the files come from different checkpoints"
        )
    return config, state, tokenizer


def _require(folder: Path, names: tuple[str, ...]) -> None:
    missing = [name for name in names if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"checkpoint folder {folder} lacks {', '.join(missing)}; a checkpoint needs "
            f"{CONFIG_FILE}, {WEIGHTS_FILE} and {TOKENIZER_FILE} (re-save or re-download it)"
        )


def _read_own_format(folder: Path) -> tuple[CheckpointConfig, dict[str, torch.Tensor]]:
    try:
        data = json.loads((folder / CONFIG_FILE).read_text())
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{folder / CONFIG_FILE} is not valid JSON ({error}); re-save the checkpoint"
        ) from None
    config = CheckpointConfig.from_dict(data, folder / CONFIG_FILE)
    try:
        state = load_file(str(folder / WEIGHTS_FILE))
    except (SafetensorError, OSError) as error:
        raise ValueError(
            f"{folder / WEIGHTS_FILE} cannot be read ({error}); re-save the checkpoint"
        ) from None
    return config, state


def check_weights(config: ModelConfig, state: dict[str, torch.Tensor], folder: Path) -> None:
    """Names and shapes of the weights must match the config exactly."""
    with torch.device("meta"):
        expected = {k: v.shape for k, v in Transformer(config).state_dict().items()}
    if config.tie_embeddings:
        expected.pop("lm_head.weight")
    problems = [f"missing {name}" for name in expected if name not in state]
    problems += [f"unexpected {name}" for name in state if name not in expected]
    problems += [
        f"{name} has shape {tuple(state[name].shape)}, config.json implies {tuple(shape)}"
        for name, shape in expected.items()
        if name in state and state[name].shape != shape
    ]
    if problems:
        shown = "; ".join(problems[:5]) + (
            f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        )
        raise ValueError(
            f"{folder / WEIGHTS_FILE} does not match {folder / CONFIG_FILE}: {shown}. "
            "The weights and config come from different models; re-save the checkpoint"
        )
