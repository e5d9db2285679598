"""Blend two runs in weight space: ``python -m quicksilver.models.reasoner_tiny.blend BASE TUNED``.

A continuation that practises the weak skills also unlearns some strong ones (on the
CPU, ordering and comparison rose while addition and refusals fell). Two runs of one
lineage, the tuned one started from the base, lie close enough in weight space that the
points between them are good models too, and a point between keeps much of what each
knows (as in WiSE-FT, Wortsman et al. 2022). ``--share`` is how far to go from the base
towards the tuned run: 0 is the base, 1 the tuned run.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

import torch
from quicksilver.engine import Engine


def blend(base: Engine, tuned: Engine, share: float) -> Engine:
    """``(1 - share) · base + share · tuned``, weight by weight, with the tuned run's
    tokenizer and sampler settings. The two must share a tokenizer and a shape."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the share is between 0 (the base) and 1 (the tuned run), not {share}")
    if base.tokenizer.fingerprint() != tuned.tokenizer.fingerprint():
        raise ValueError(
            "the runs' tokenizers differ, so their token rows mean different things; blend "
            "a run only with one it was continued from (--init-from without --grow-vocabulary)"
        )
    if base.model.config != tuned.model.config:
        raise ValueError("the runs' model shapes differ; only runs of one lineage blend")
    base_state, tuned_state = base.model.state_dict(), tuned.model.state_dict()
    with torch.no_grad():
        blended = {
            name: (1 - share) * base_state[name].float() + share * tuned_state[name].float()
            for name in tuned_state
        }
    model = copy.deepcopy(tuned.model)  # its shape and tied embeddings, no fresh init
    model.load_state_dict(blended)
    return Engine(model, tuned.tokenizer, tuned.sampler)


def load(run: Path) -> Engine:
    """A run in float32 on the CPU, so that the blend is exact whatever it was saved in."""
    return Engine.load(run, device="cpu", dtype=torch.float32)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help="the run the tuned one was continued from")
    parser.add_argument("tuned", type=Path, help="the continued run")
    parser.add_argument(
        "--share", type=float, required=True, help="0 keeps the base, 1 the tuned run"
    )
    parser.add_argument("--out", type=Path, required=True, help="the blended run's folder")
    args = parser.parse_args(argv)
    engines = [load(run) for run in (args.base, args.tuned)]
    try:
        blended = blend(*engines, share=args.share)
    except ValueError as error:
        parser.error(str(error))
    blended.save(args.out, dtype=torch.float16)
    record = args.tuned / "training.json"
    training = json.loads(record.read_text()) if record.is_file() else {}
    training["blend"] = {"base": str(args.base), "tuned": str(args.tuned), "share": args.share}
    (args.out / "training.json").write_text(json.dumps(training, indent=2))
    print(f"{args.out}: {1 - args.share:g} × {args.base} + {args.share:g} × {args.tuned}")
    print(f"continue it with --init-from {args.out}, or ship it with:")
    print(f"python -m quicksilver.models.reasoner_tiny.ship {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
