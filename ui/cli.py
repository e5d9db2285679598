"""The ``quicksilver`` command.

Each subcommand is a small function ``cmd_<name>(args, settings) -> int`` that calls
the public ``engine``/``audio``/``assistant`` APIs with the layered settings (defaults →
config.toml → QUICKSILVER_* → the flags given); heavy imports happen inside them so
that ``quicksilver --help`` stays instant. Arguments and output paths are checked
before any model loads.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from quicksilver.assistant.config import Settings
from quicksilver.ui.conversation import (
    add_conversation_options,
    add_converse_command,
    run_conversation,
)
from quicksilver.ui.flags import ENGINE, add_setting_flags, settings_from
from quicksilver.ui.server.cli import add_server_commands

if TYPE_CHECKING:
    from quicksilver.models.reasoner_tiny.evaluate import Evaluation


def _version() -> str:
    try:
        return version("quicksilver")
    except PackageNotFoundError:  # running from a source tree that is not installed
        from quicksilver.engine import __version__

        return __version__


class UserError(Exception):
    """A problem the user can fix; printed as one line, without a traceback."""


# --------------------------------------------------------------------------- engine


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Per-skill accuracy of a model on reasoner-tiny's held-out sets."""
    import json

    from quicksilver.engine import Engine
    from quicksilver.engine.machine import describe
    from quicksilver.models.reasoner_tiny.evaluate import evaluate, left_to_right

    if args.per_skill < 1:
        raise UserError(f"--per-skill must be at least 1, got {args.per_skill}")
    budgets = getattr(args, "step_budgets", None) or [settings.steps]
    if any(steps is not None and steps < 1 for steps in budgets):
        raise UserError(f"every step budget must be at least 1, got {budgets}")
    engine = Engine.load(settings.model, device=settings.device)
    budgets = [steps or engine.sampler.steps for steps in budgets]
    results = [
        evaluate(
            engine,
            args.per_skill,
            steps,
            follow_up=args.follow_up,
            trained_phrasings=args.trained_phrasings,
        )
        for steps in budgets
    ]
    in_order = left_to_right(engine, args.per_skill) if args.in_order else None
    machine = describe(engine.device)  # the latency's context
    if args.json:
        figures = [{**r.to_dict(), "machine": machine} for r in results]
        for entry in figures if in_order else ():
            entry["in_reading_order"] = {skill: round(v, 4) for skill, v in in_order.items()}
        print(json.dumps(figures, indent=2))
        return 0
    header = f"{'skill':<20}" + "".join(f"{f'{r.steps} steps':>11}" for r in results)
    print(header + (f"{'in order':>11}" if in_order else ""))
    for i, score in enumerate(results[0].scores):
        row = "".join(f"{r.scores[i].accuracy:>10.0%} " for r in results)
        if in_order:
            row += f"{in_order[score.skill]:>10.0%} "
        print(f"{score.skill:<20}{row}")
    print(f"{'p50 latency':<20}" + "".join(f"{r.p50_ms:>8.0f} ms" for r in results))
    print(f"{'measured on':<20}{machine}")
    if args.show_misses:
        _print_misses(results[0])
    return 0


def _print_misses(result: Evaluation) -> None:
    """A few wrong answers per skill, after how many of each kind there were."""
    from quicksilver.models.reasoner_tiny.evaluate import miss_kind

    print(f"\nwrong answers at {result.label}, by kind: another frame (the wording not "
          "understood) or a wrong value (the reasoning slipped)")  # fmt: skip
    for score in result.scores:
        if not score.miss_kinds:
            continue
        kinds = ", ".join(f"{n} {kind}" for kind, n in score.miss_kinds.most_common())
        print(f"[{score.skill}] {score.total - score.correct} of {score.total}: {kinds}")
        for question, wanted, got in score.misses:
            print(f"    {question!r}: wanted {wanted!r}, got {got!r} ({miss_kind(wanted, got)})")


def cmd_ask(args: argparse.Namespace, settings: Settings) -> int:
    """Answer one typed question with the diffusion engine."""
    import json
    from datetime import date

    if not args.question.strip():
        raise UserError('the question is empty; ask something, e.g. "what is 17 times 3"')
    options = {"steps": settings.steps, "max_new_tokens": args.max_new_tokens}
    options = {name: value for name, value in options.items() if value is not None}
    if any(value < 1 for value in options.values()):
        raise UserError(f"--steps and --max-new-tokens must be at least 1, got {options}")
    from quicksilver.assistant.stages import UNSURE, spoken_answer, unsure_threshold
    from quicksilver.engine import Engine

    engine = Engine.load(settings.model, device=settings.device)
    context = engine.date_context(date.today()) if args.context is None else args.context
    messages = [{"role": "user", "content": args.question}]
    if context:
        messages.insert(0, {"role": "system", "content": context})
    answer = engine.answer(messages, **options)
    threshold = unsure_threshold(engine, settings.unsure_below)  # the assistant's
    if args.json:
        figures = {
            "answer": answer.text,
            "thinking": answer.thinking,
            "steps": answer.steps,
            "forward_passes": answer.forward_passes,
            "latency_ms": round(answer.latency_s * 1000, 2),
            # how sure the model was of its answer, and the level under which the
            # assistant says it is not sure instead (null: none set and none measured)
            "confidence": answer.confidence,
            "unsure_below": threshold,
        }
        if answer.expert is not None:  # a routed checkpoint: who answered, the router's cost
            figures |= {"expert": answer.expert, "router_passes": answer.router_passes}
        print(json.dumps(figures))
        return 0
    if settings.show_thinking and answer.thinking:
        print(f"(thinking) {answer.thinking}")
    print(answer.text)
    if not answer.text.strip():
        print(
            "quicksilver: the model wrote no spoken answer; ask it another way, or give it "
            "more --steps (--show-thinking shows what it worked out)",
            file=sys.stderr,
        )
    elif spoken_answer(answer, threshold).text == UNSURE:
        print(
            f"quicksilver: the model was unsure of this answer (confidence "
            f"{answer.confidence:.2f}, below {threshold:.2f}), and the assistant would say it "
            "is not sure instead; check it, or ask it another way",
            file=sys.stderr,
        )
    return 0


def _add_engine_commands(sub: argparse._SubParsersAction) -> None:
    ask = sub.add_parser(
        "ask",
        help="answer a typed question with the diffusion engine",
        description="Answer one question with the diffusion reasoning engine and print it.",
    )
    ask.add_argument("question", help='the question, e.g. "what is 17 times 3"')
    add_setting_flags(ask, ENGINE)
    ask.add_argument(
        "--max-new-tokens", type=int, default=None, help="reply canvas length (default: model's)"
    )
    ask.add_argument(
        "--context",
        default=None,
        help="what the model is told first (default: today's date for a model trained to "
        'read it, e.g. "Today is Sunday, November 29, 2026.", else nothing); "" for nothing',
    )
    ask.add_argument("--json", action="store_true", help="print the answer and figures as JSON")
    ask.set_defaults(func=cmd_ask)

    evaluation = sub.add_parser(
        "eval",
        help="per-skill accuracy of the shipped model on its held-out sets",
        description="Answer the held-out questions of every skill (numbers, words, dates and "
        "phrasings never seen in training) and print the share answered exactly right.",
    )
    add_setting_flags(evaluation, ("model", "device"))
    evaluation.add_argument(
        "--steps",
        type=int,
        nargs="+",
        dest="step_budgets",
        metavar="N",
        help="step budgets to compare (default: the steps setting, else the model's own)",
    )
    evaluation.add_argument("--per-skill", type=int, default=50, help="questions per skill")
    evaluation.add_argument("--json", action="store_true", help="print the figures as JSON")
    evaluation.add_argument(
        "--follow-up",
        action="store_true",
        help="ask every question after an earlier exchange, as in a conversation",
    )
    evaluation.add_argument(
        "--trained-phrasings",
        action="store_true",
        help="ask the held-out numbers, words and dates in the phrasings training uses "
        "(a skill far better so is held back by unfamiliar wording, not its reasoning)",
    )
    evaluation.add_argument(
        "--show-misses", action="store_true", help="print a few wrong answers per skill"
    )
    evaluation.add_argument(
        "--in-order",
        action="store_true",
        help="also score each reply in reading order: every token from the right ones "
        "before it (does the model work its reasoning out, or fill it in from the answer?)",
    )
    evaluation.set_defaults(func=cmd_eval)


def cmd_train(args: argparse.Namespace, settings: Settings) -> int:
    """Train a new model, or fine-tune a checkpoint, on a JSON-lines file."""
    from quicksilver.engine import Engine, ModelConfig, Tokenizer
    from quicksilver.engine.train import TrainConfig, load_examples, train

    examples = load_examples(args.data)
    if args.init:
        engine = Engine.load(args.init, device=settings.device)
    else:
        tokenizer = Tokenizer.byte_level()
        shape = ModelConfig(
            vocab_size=tokenizer.vocab_size,
            d_model=args.d_model,
            n_layers=args.layers,
            n_heads=args.heads,
            max_seq_len=args.context,
            prompt_sees_reply=False,
        )
        engine = Engine.random(shape, seed=args.seed, device=settings.device, tokenizer=tokenizer)
    config = TrainConfig(
        steps=args.train_steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=min(args.train_steps // 10, 200),
        reply_length=args.reply_length,
        seed=args.seed,
        out_dir=args.out,
        save_every=args.save_every,
        time_limit_s=args.time_limit * 60 if args.time_limit else None,
    )
    result = train(engine, examples, config)
    tail = result.losses[-50:]
    loss = f"{sum(tail) / len(tail):.4f}" if tail else "n/a"
    print(
        f"trained to step {result.steps}/{config.steps} on {len(examples)} examples in "
        f"{result.seconds:.0f} s (mean loss of the last {len(tail)} steps: {loss}); "
        f"checkpoint: {result.checkpoint}"
    )
    return 0


def _add_train_command(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "train",
        help="train or fine-tune a diffusion model on a JSON-lines file",
        description="Train a new model (byte-level tokenizer) or fine-tune a checkpoint with "
        "the masked-diffusion objective. Each line of DATA is "
        '{"question": "...", "thinking": "...", "answer": "..."} (or "messages" for a '
        "conversation). Run it again with the same --out to resume.",
    )
    parser.add_argument("data", help="JSON-lines training file")
    parser.add_argument("--out", required=True, help="checkpoint folder to write (and resume)")
    parser.add_argument("--init", help="checkpoint to fine-tune (default: a new model)")
    parser.add_argument("--steps", type=int, default=2000, dest="train_steps")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--reply-length", type=int, help="canvas length (default: longest reply)")
    parser.add_argument("--save-every", type=int, default=200, help="steps between checkpoints")
    parser.add_argument("--time-limit", type=float, help="minutes to train in this run")
    parser.add_argument("--seed", type=int, default=0)
    add_setting_flags(parser, ["device"])
    new = parser.add_argument_group("shape of a new model")
    new.add_argument("--d-model", type=int, default=256)
    new.add_argument("--layers", type=int, default=4)
    new.add_argument("--heads", type=int, default=4)
    new.add_argument("--context", type=int, default=512)
    parser.set_defaults(func=cmd_train)


# --------------------------------------------------------------------------- audio


def _format_time(seconds: float) -> str:
    minutes, seconds = divmod(seconds, 60)
    return f"{int(minutes):02d}:{seconds:04.1f}"


def cmd_transcribe(args: argparse.Namespace, settings: Settings) -> int:
    """Print the transcript of a WAV file; long files print segment by segment."""
    from quicksilver.assistant.loading import resolve_whisper_model
    from quicksilver.audio.stt import SttOptions, Transcriber
    from quicksilver.audio.wavfile import read_wav

    samples = read_wav(args.file)
    options = SttOptions(language=args.language, beam_size=args.beam_size)
    model = resolve_whisper_model(settings.whisper_model)
    transcriber = Transcriber(model, device=args.whisper_device, options=options)
    found = False
    for segment in transcriber.segments(samples):
        found = True
        if args.timestamps:
            span = f"[{_format_time(segment.start_s)} → {_format_time(segment.end_s)}]"
            print(f"{span} {segment.text}", flush=True)
        else:
            print(segment.text, flush=True)
    if not found:
        print(f"quicksilver transcribe: no speech found in {args.file}", file=sys.stderr)
        return 1
    return 0


def cmd_say(args: argparse.Namespace, settings: Settings) -> int:
    """Speak text with Piper: write it to a WAV file, or play it as it is synthesised."""
    import numpy as np
    from quicksilver.audio.devices import AudioDeviceError, Speaker
    from quicksilver.audio.tts import Voice
    from quicksilver.audio.wavfile import check_output_path, write_wav

    if args.output:
        check_output_path(args.output)
    text = sys.stdin.read() if args.text == "-" else args.text
    tuning = {name: getattr(args, name) for name in ("rate", "volume") if hasattr(args, name)}
    voice = Voice(settings.voice, **tuning)  # the voice's own rate and volume unless given
    chunks = voice.synthesize(text)
    first = next(chunks, None)
    if first is None:
        raise UserError("nothing to say: the text has no words, numbers or letters to speak")
    if args.output:
        samples = np.concatenate([first.samples, *(chunk.samples for chunk in chunks)])
        write_wav(args.output, samples, voice.sample_rate)
        print(f"wrote {samples.size / voice.sample_rate:.1f} s of speech to {args.output}")
        return 0
    try:
        with Speaker(settings.output_device, sample_rate=voice.sample_rate) as speaker:
            speaker.play(first.samples)
            for chunk in chunks:
                speaker.play(chunk.samples)
            speaker.wait()
    except AudioDeviceError as error:
        raise UserError(f"{error} (or write the speech to a file with -o OUT.wav)") from error
    return 0


def cmd_devices(args: argparse.Namespace, settings: Settings) -> int:
    """List the sound devices PortAudio sees, inputs and outputs, with default rates."""
    from quicksilver.audio.devices import AudioDeviceError, list_devices

    try:
        devices = list_devices()
    except AudioDeviceError as error:
        raise UserError(str(error)) from error
    if not devices:
        raise UserError(
            "no sound devices found: check that a sound card is present and that the sound "
            "server (PulseAudio/PipeWire) is running and reachable"
        )
    for kind in ("input", "output"):
        listed = [d for d in devices if getattr(d, f"{kind}_channels") > 0]
        print(f"{kind}s:")
        if not listed:
            print("  (none)")
        for d in listed:
            mark = "*" if getattr(d, f"is_default_{kind}") else " "
            channels = getattr(d, f"{kind}_channels")
            print(
                f" {mark}{d.index:3d}  {d.name}  ({d.hostapi}, {channels} ch, "
                f"{d.default_rate:g} Hz)"
            )
    print("* default; select a device by index or by part of its name")
    return 0


def _add_audio_commands(sub: argparse._SubParsersAction) -> None:
    from quicksilver.audio.stt import SttOptions

    transcribe = sub.add_parser(
        "transcribe",
        help="print the transcript of a WAV file",
        description="Transcribe a WAV file (any rate, channels or sample width) with Whisper.",
    )
    transcribe.add_argument("file", help="the WAV file")
    transcribe.add_argument(
        "--model",
        dest="whisper_model",
        default=argparse.SUPPRESS,
        help="faster-whisper model name (e.g. base.en, downloaded once), tiny.en-quicksilver "
        "(tiny.en fine-tuned on spoken questions, shipped) or CTranslate2 folder; "
        "default: the whisper_model setting (tiny.en-quicksilver)",
    )
    decoding = SttOptions()
    transcribe.add_argument(
        "--language",
        default=decoding.language,
        help=f"spoken language (default {decoding.language})",
    )
    transcribe.add_argument(
        "--beam-size",
        type=int,
        default=decoding.beam_size,
        help=f"beam size (default {decoding.beam_size})",
    )
    transcribe.add_argument(
        "--device", dest="whisper_device", default="auto", help="cpu, cuda or auto (default)"
    )
    transcribe.add_argument(
        "--timestamps", action="store_true", help="prefix each segment with its time span"
    )
    transcribe.set_defaults(func=cmd_transcribe)

    say = sub.add_parser(
        "say",
        help="speak text with Piper (play it, or write a WAV with -o)",
        description="Speak text with a Piper voice; numbers, units and symbols are read out.",
    )
    say.add_argument("text", help='the text, or "-" to read it from standard input')
    say.add_argument("-o", "--output", help="write a 16-bit WAV file instead of playing")
    add_setting_flags(say, ("voice", "output_device"))
    say.add_argument(
        "--rate", type=float, default=argparse.SUPPRESS, help="speaking rate, 0.25-4 (default 1)"
    )
    say.add_argument(
        "--volume", type=float, default=argparse.SUPPRESS, help="volume, 0-2 (default 1)"
    )
    say.set_defaults(func=cmd_say)

    devices = sub.add_parser(
        "devices",
        help="list microphones and speakers",
        description="List the sound devices PortAudio sees, with their default sample rates.",
    )
    devices.set_defaults(func=cmd_devices)


# --------------------------------------------------------------------------- assistant


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    """Print the effective settings, each with the layer that set it."""
    import dataclasses
    import json

    from quicksilver.assistant.config import default_config_path
    from quicksilver.assistant.transcript import default_log_path

    settings, sources = settings_from(args)
    values = dataclasses.asdict(settings)
    if args.json:
        report = {name: {"value": value, "source": sources[name]} for name, value in values.items()}
        print(json.dumps(report, indent=2, default=str))
        return 0
    path = default_config_path()
    state = "" if path.is_file() else " (not there; create it to change the defaults)"
    print(f"# config file: {path}{state}; environment: QUICKSILVER_<NAME>")
    # what None means, where it is not a device
    unset = {"log_path": str(default_log_path()), "steps": "(the model's own)"}
    text = {name: _setting_text(value, unset.get(name)) for name, value in values.items()}
    name_width, value_width = max(map(len, text)), max(map(len, text.values()))
    for name, value in text.items():
        print(f"{name:<{name_width}} = {value:<{value_width}}  ({sources[name]})")
    return 0


def _setting_text(value: object, unset: str | None) -> str:
    if value is None:
        return unset or "(system default)"
    return str(value).lower() if isinstance(value, bool) else str(value)


def cmd_history(args: argparse.Namespace, settings: Settings) -> int:
    """Print the most recent turns of the transcript log."""
    import json

    from quicksilver.assistant.transcript import TranscriptLog

    if args.n < 1:
        raise UserError(f"-n must be at least 1, got {args.n}")
    log = TranscriptLog(settings.log_path)
    records, skipped = log.read_recent(args.n)
    if skipped:
        more = f" and {len(skipped) - 1} more like it" if len(skipped) > 1 else ""
        print(f"quicksilver history: {skipped[0]}{more}", file=sys.stderr)
    if args.json:
        print(json.dumps([r.to_dict() for r in records], indent=2, ensure_ascii=False))
        return 0
    if not records:
        print(f"no turns yet (the log is {log.path})")
    for record in records:
        when = _local_time(record.started_at)
        said = record.spoken if record.interrupted else record.answer
        mark = " (interrupted)" if record.interrupted else ""
        print(f"{when}  you: {record.user}")
        print(f"{'':<{len(when)}}  quicksilver: {said}{mark}".rstrip())
    return 0


def _local_time(iso: str) -> str:
    """``2026-11-29 14:03:12`` from an ISO time; the text as it is when it is not one."""
    from datetime import datetime

    try:
        return f"{datetime.fromisoformat(iso):%Y-%m-%d %H:%M:%S}"
    except ValueError:
        return iso


def _add_assistant_commands_admin(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser(
        "config",
        help="show the effective settings and where each comes from",
        description="Print every setting with its value and the layer that set it: the "
        "default, the config file (~/.config/quicksilver/config.toml, or under "
        "$XDG_CONFIG_HOME), an environment variable QUICKSILVER_<NAME>, or a flag. "
        "The config file holds one setting per line, e.g. steps = 32 or headset = true.",
    )
    config.add_argument("--json", action="store_true", help="print the settings as JSON")
    config.set_defaults(func=cmd_config)

    history = sub.add_parser(
        "history",
        help="print the most recent turns of the conversation log",
        description="Print recent turns from the transcript log (by default "
        "~/.local/share/quicksilver/history.jsonl, or under $XDG_DATA_HOME; the log_path "
        "setting moves it): when, what you said, what the assistant said.",
    )
    history.add_argument("-n", type=int, default=10, help="how many turns (default 10)")
    history.add_argument("--json", action="store_true", help="print the turns as JSON")
    history.set_defaults(func=cmd_history)


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quicksilver",
        description="Quicksilver: a real-time voice assistant for the terminal whose brain "
        "is a diffusion language model. It writes each whole answer, reasoning included, "
        "in a fixed number of parallel denoising steps.",
    )
    parser.add_argument("--version", action="version", version=f"quicksilver {_version()}")
    add_conversation_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_engine_commands(sub)
    _add_train_command(sub)
    _add_audio_commands(sub)
    _add_assistant_commands_admin(sub)
    add_converse_command(sub)
    add_server_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings, _ = settings_from(args)
        if args.command is None:
            return run_conversation(args, settings)
        return args.func(args, settings)
    except (UserError, ValueError, FileNotFoundError, IsADirectoryError) as error:
        name = f"quicksilver {args.command}" if args.command else "quicksilver"
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `quicksilver config | head -3`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
