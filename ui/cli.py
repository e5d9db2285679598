"""The ``quicksilver`` command.

Each subcommand is a small function ``cmd_<name>(args) -> int`` that calls the public
``engine``/``audio``/``assistant`` APIs; heavy imports happen inside them so that
``quicksilver --help`` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version


def _version() -> str:
    try:
        return version("quicksilver")
    except PackageNotFoundError:  # running from a source tree that is not installed
        from engine import __version__

        return __version__


class UserError(Exception):
    """A problem the user can fix; printed as one line, without a traceback."""


# --------------------------------------------------------------------------- engine


def cmd_ask(args: argparse.Namespace) -> int:
    """Answer one typed question with the diffusion engine."""
    import json

    from engine import Engine

    engine = Engine.load(args.model, device=args.device)
    answer = engine.answer(args.question, steps=args.steps, max_new_tokens=args.max_new_tokens)
    if args.json:
        print(
            json.dumps(
                {
                    "answer": answer.text,
                    "thinking": answer.thinking,
                    "steps": answer.steps,
                    "forward_passes": answer.forward_passes,
                    "latency_ms": round(answer.latency_s * 1000, 2),
                }
            )
        )
        return 0
    if args.show_thinking and answer.thinking:
        print(f"(thinking) {answer.thinking}")
    print(answer.text)
    return 0


def _add_engine_commands(sub: argparse._SubParsersAction) -> None:
    ask = sub.add_parser(
        "ask",
        help="answer a typed question with the diffusion engine",
        description="Answer one question with the diffusion reasoning engine and print it.",
    )
    ask.add_argument("question", help='the question, e.g. "what is 17 times 3"')
    ask.add_argument(
        "--model",
        default="bundled",
        help="checkpoint folder (config.json, model.safetensors, tokenizer.json); "
        "default: the model shipped with Quicksilver",
    )
    ask.add_argument("--steps", type=int, default=16, help="denoising steps (default 16)")
    ask.add_argument(
        "--max-new-tokens", type=int, default=None, help="reply canvas length (default: model's)"
    )
    ask.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 or auto (default)")
    ask.add_argument("--json", action="store_true", help="print the answer and figures as JSON")
    ask.add_argument("--show-thinking", action="store_true", help="also print the hidden reasoning")
    ask.set_defaults(func=cmd_ask)


# --------------------------------------------------------------------------- audio


def _add_audio_commands(sub: argparse._SubParsersAction) -> None:
    """transcribe, say, devices: filled in by the audio work."""


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quicksilver",
        description="Quicksilver: a real-time voice assistant for the terminal whose brain "
        "is a diffusion language model. It writes each whole answer, reasoning included, "
        "in a fixed number of parallel denoising steps.",
    )
    parser.add_argument("--version", action="version", version=f"quicksilver {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_engine_commands(sub)
    _add_audio_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return args.func(args)
    except (UserError, ValueError, FileNotFoundError) as error:
        print(f"quicksilver {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
