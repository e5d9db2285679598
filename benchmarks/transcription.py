"""Transcription accuracy per voice, and each decoding option's latency beside it.

The shipped model's held-out questions (``benchmarks/spoken_set.py``), said by six
synthetic voices, clean and with room noise at 20 dB SNR, go through Whisper with each
option; a transcript counts when every number, operator, unit and asked word of the
question reaches the engine (``content_intact``). With ``--answers`` the shipped engine
also answers every transcript and its written question (16 steps, one fixed date), and a
clip whose transcript gets the written question's answer counts as *same answer*: what
a mishearing costs the user, where a different word asks the same ("what day is it" for
"what date is it"). Every option hears every clip in turn, clip by clip, so their
latencies are measured side by side under the same load: compare the ratios, not the
milliseconds, on a shared machine.

    python -m benchmarks.transcription [--per-skill 3] [--options tiny,tiny-prompt,...]
        [--threads 1] [--answers] [--json results.json]   (from the repository root)
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from quicksilver.assistant.loading import (
    load_engine,
    load_question_model,
    resolve_whisper_model,
)
from quicksilver.audio.stt import DOMAIN_PROMPT, SttOptions, Transcriber
from quicksilver.audio.synthetic_speech import as_utterance, with_noise
from quicksilver.audio.textnorm import spoken_numbers_to_digits

from benchmarks.spoken_set import SPEAKERS, missing_content, questions

SNR_DB = 20.0
ANSWER_STEPS = 16  # the assistant's step budget
ANSWER_DATE = datetime.date(2026, 11, 30)  # the date every answer is given (test_shipped's)
DOMAIN_HOTWORDS = (
    "plus minus times divided by spell backwards letter first last bigger smaller sort "
    "kilometers meters centimeters kilograms grams hours minutes seconds days"
)


@dataclass(frozen=True)
class Option:
    """One way to transcribe: a model, its decoding options, its CPU threads (0: the
    benchmark's ``--threads``) and whether the shipped question model rescores Whisper's
    hypotheses."""

    model: str
    stt: SttOptions
    threads: int = 0
    questions: bool = False


def options(base: str) -> dict[str, Option]:
    """Each lever alone against the old default (no prompt, numbers not joined), then the
    promising combinations."""
    old = SttOptions(initial_prompt=None, join_numbers=False)
    prompt = replace(old, initial_prompt=DOMAIN_PROMPT)
    return {
        "tiny": Option("tiny.en", old),
        "tiny-join": Option("tiny.en", replace(old, join_numbers=True)),
        "tiny-full": Option("tiny.en", replace(old, short_window=False)),
        "tiny-beam5": Option("tiny.en", replace(old, beam_size=5)),
        "tiny-timestamps": Option("tiny.en", replace(old, without_timestamps=False)),
        "tiny-hotwords": Option("tiny.en", replace(old, hotwords=DOMAIN_HOTWORDS)),
        "tiny-prompt": Option("tiny.en", prompt),
        "tiny-prompt-join": Option("tiny.en", replace(prompt, join_numbers=True)),
        "tiny-prompt-join-2threads": Option("tiny.en", replace(prompt, join_numbers=True), 2),
        "tiny-prompt-beam5-join": Option(
            "tiny.en", replace(prompt, beam_size=5, join_numbers=True)
        ),
        "tiny-prompt-full-join": Option(
            "tiny.en", replace(prompt, short_window=False, join_numbers=True)
        ),
        **{
            f"tiny-prompt-beam5-join-questions{weight}": Option(
                "tiny.en",
                replace(prompt, beam_size=5, join_numbers=True, question_weight=float(weight)),
                questions=True,
            )
            for weight in ("0.02", "0.05", "0.1", "0.2")
        },
        # The shipped defaults (as a session runs them: with the question model), on
        # tiny.en and on tiny.en fine-tuned on spoken questions (models/whisper_quicksilver)
        "default": Option("tiny.en", SttOptions(), questions=True),
        "quicksilver": Option("tiny.en-quicksilver", SttOptions(), questions=True),
        "quicksilver-alone": Option("tiny.en-quicksilver", SttOptions()),
        "quicksilver-noprompt": Option(
            "tiny.en-quicksilver", replace(SttOptions(), initial_prompt=None), questions=True
        ),
        "quicksilver-beam1": Option(
            "tiny.en-quicksilver", replace(SttOptions(), beam_size=1), questions=True
        ),
        # Other encoder windows than the default (the clip plus a margin, at least N s)
        **{
            f"{prefix}-window{name}": Option(
                model,
                replace(SttOptions(), min_window_s=seconds, window_margin_s=margin),
                questions=True,
            )
            for prefix, model in (("quicksilver", "tiny.en-quicksilver"), ("default", "tiny.en"))
            for name, seconds, margin in (
                ("8", 8.0, 2.0),
                ("6", 6.0, 2.0),
                ("5", 5.0, 2.0),
                ("3-margin1", 3.0, 1.0),
            )
        },
        "base": Option(base, old),
        # The shipped defaults on --base (Whisper base, or base with an adapter merged)
        "base-default": Option(base, SttOptions(), questions=True),
        "base-noprompt": Option(base, replace(SttOptions(), initial_prompt=None), questions=True),
        "base-full": Option(base, replace(old, short_window=False)),
        "base-prompt-join": Option(base, replace(prompt, join_numbers=True)),
        "base-prompt-beam5-join": Option(base, replace(prompt, beam_size=5, join_numbers=True)),
        "base-prompt-full-join": Option(
            base, replace(prompt, short_window=False, join_numbers=True)
        ),
    }


@dataclass
class Tally:
    intact: int = 0
    total: int = 0
    seconds: list[float] = field(default_factory=list)
    misses: list[tuple[str, str, list[str]]] = field(default_factory=list)
    alike: int | None = None  # clips whose transcript gets the question's answer (--answers)
    heard: list[tuple[str, str]] = field(default_factory=list)  # (question, transcript)


def run(args: argparse.Namespace) -> dict[str, dict[str, Tally]]:
    chosen = {name: option for name, option in options(args.base).items()
              if name in args.options}  # fmt: skip

    # Joining numbers is text work after decoding: an option that joins reuses the
    # transcript (and the time) of its twin that does not.
    def key(option: Option) -> tuple[str, SttOptions, int, bool]:
        stt = replace(option.stt, join_numbers=False)
        return option.model, stt, option.threads, option.questions

    question_model = load_question_model("bundled")
    transcribers: dict[tuple[str, SttOptions, int, bool], Transcriber] = {}
    for option in chosen.values():
        if key(option) not in transcribers:
            transcribers[key(option)] = Transcriber(
                resolve_whisper_model(option.model),
                device="cpu",
                cpu_threads=option.threads or args.threads,
                options=key(option)[1],
                questions=question_model if option.questions else None,
            )
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    asked = questions(args.per_skill, args.seed)
    speakers = [s for s in SPEAKERS if not args.speakers or s.name in args.speakers]
    for number, question in enumerate(asked):
        for speaker in speakers:
            clean = as_utterance(speaker.say(question))
            for condition, audio in (("clean", clean), ("noise", with_noise(clean, SNR_DB))):
                column = f"{speaker.name} {condition}"
                heard: dict[tuple[str, SttOptions, int, bool], tuple[str, float]] = {}
                for name, option in chosen.items():
                    if key(option) not in heard:
                        start = time.perf_counter()
                        text = transcribers[key(option)].transcribe(audio)
                        heard[key(option)] = (text, time.perf_counter() - start)
                    text, seconds = heard[key(option)]
                    if option.stt.join_numbers:
                        text = spoken_numbers_to_digits(text)
                    missing = missing_content(question, text)
                    tally = tallies[name][column]
                    tally.total += 1
                    tally.intact += not missing
                    tally.seconds.append(seconds)
                    tally.heard.append((question, text))
                    if missing:
                        tally.misses.append((question, text, missing))
        print(f"{number + 1}/{len(asked)} questions", flush=True)
    return tallies


def count_same_answers(tallies: dict[str, dict[str, Tally]], threads: int) -> None:
    """Set each tally's ``alike``: the shipped engine's answer to each transcript against
    its answer to the written question, on one date (the answers are cached by text)."""
    engine = load_engine("bundled", "cpu", threads)
    context = engine.date_context(ANSWER_DATE)
    said: dict[str, str] = {}

    def answer(text: str) -> str:
        if text not in said:
            messages = [{"role": "system", "content": context}] if context else []
            messages.append({"role": "user", "content": text})
            said[text] = engine.answer(messages, steps=ANSWER_STEPS).text
        return said[text]

    for by_column in tallies.values():
        for tally in by_column.values():
            tally.alike = sum(answer(q) == answer(h) for q, h in tally.heard)


def report(tallies: dict[str, dict[str, Tally]], reference: str) -> str:
    """A markdown table: content intact per voice and condition, median latency, ratio;
    then, where they were counted, the same answers in the same layout."""
    names = list(tallies)
    columns = list(tallies[names[0]])
    voices = list(dict.fromkeys(c.rsplit(" ", 1)[0] for c in columns))
    medians = {
        name: statistics.median(s for t in tallies[name].values() for s in t.seconds)
        for name in names
    }

    def table(count: Callable[[Tally], int]) -> list[str]:
        header = ["option", *voices, "clean", "noise", "all", "p50 ms", "× " + reference]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for name in names:
            by_column = tallies[name]

            def share(keys: list[str], by_column: dict[str, Tally] = by_column) -> str:
                counted = sum(count(by_column[k]) for k in keys)
                total = sum(by_column[k].total for k in keys)
                return f"{100 * counted / total:.0f}%" if total else "–"

            cells = [share([c for c in columns if c.rsplit(" ", 1)[0] == v]) for v in voices]
            for condition in ("clean", "noise"):
                cells.append(share([c for c in columns if c.endswith(condition)]))
            cells.append(share(columns))
            ratio = medians[name] / medians[reference] if reference in medians else float("nan")
            cells += [f"{1000 * medians[name]:.0f}", f"{ratio:.2f}"]
            lines.append("| " + " | ".join([name, *cells]) + " |")
        return lines

    lines = ["Content intact:", "", *table(lambda t: t.intact)]
    if all(t.alike is not None for by_column in tallies.values() for t in by_column.values()):
        lines += ["", "Same answer:", "", *table(lambda t: t.alike or 0)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-skill", type=int, default=3, help="questions per skill")
    parser.add_argument("--seed", type=int, default=1234, help="held-out draw (eval's seed)")
    parser.add_argument("--options", default="tiny,tiny-prompt,tiny-prompt-join",
                        help=f"comma-separated, of: {', '.join(options('base'))}")  # fmt: skip
    parser.add_argument("--speakers", default="", help="comma-separated speaker names")
    parser.add_argument("--base", default="base", help="the Whisper base model (name or folder)")
    parser.add_argument("--threads", type=int, default=1, help="Whisper's CPU threads")
    parser.add_argument("--json", type=Path, help="write every transcript and figure here")
    parser.add_argument("--answers", action="store_true",
                        help="also count transcripts the shipped engine answers as it answers "
                        "the written question")  # fmt: skip
    args = parser.parse_args()
    args.options = args.options.split(",")
    args.speakers = [s for s in args.speakers.split(",") if s]
    unknown = set(args.options) - set(options(args.base))
    if unknown:
        parser.error(f"unknown options {sorted(unknown)}; known: {', '.join(options('base'))}")
    tallies = run(args)
    if args.answers:
        count_same_answers(tallies, args.threads)
    print(report(tallies, args.options[0]))
    for name, by_column in tallies.items():
        misses = [m for t in by_column.values() for m in t.misses]
        print(f"\n{name}: {len(misses)} misses, e.g.")
        for question, text, missing in misses[:: max(1, len(misses) // 8)][:8]:
            print(f"  {question!r} -> {text!r} (missing {missing})")
    if args.json:
        args.json.write_text(json.dumps({
            name: {column: {"intact": t.intact, "total": t.total,
                            "p50_ms": round(1000 * float(np.median(t.seconds)), 1),
                            "same_answer": t.alike,
                            "heard": t.heard}
                   for column, t in by_column.items()}
            for name, by_column in tallies.items()
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    main()
