"""How far choosing among Whisper's hypotheses can go: the n-best ceiling per beam width.

The question model (``audio/language_model.py``) picks among the beam's best readings of
a clip. This measures, on the spoken set (``benchmarks/spoken_set.py``), for each beam
width: how often Whisper's first reading keeps the question's content intact, how often
any of its readings does (the ceiling of any rescoring), how often the question model's
choice does at each weight, and the decoding time beside the first width's, every width
hearing every clip in turn.

    python -m benchmarks.hypotheses [--per-skill 3] [--seed 7] [--beams 5,10,20]
        [--weights 0.05,0.1,0.2] [--threads 1] [--whisper tiny.en-quicksilver]
        (from the repository root)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import replace

from quicksilver.assistant.loading import load_question_model, resolve_whisper_model
from quicksilver.audio.stt import SttOptions, Transcriber
from quicksilver.audio.synthetic_speech import as_utterance, with_noise
from quicksilver.audio.textnorm import spoken_numbers_to_digits

from benchmarks.spoken_set import SPEAKERS, missing_content, questions

SNR_DB = 20.0


def run(args: argparse.Namespace) -> str:
    questions_model = load_question_model("bundled")
    transcribers = {
        beam: Transcriber(
            resolve_whisper_model(args.whisper),
            device="cpu",
            cpu_threads=args.threads,
            options=replace(SttOptions(), beam_size=beam, hypotheses=beam),
        )
        for beam in args.beams
    }
    intact: dict[int, Counter[str]] = {beam: Counter() for beam in args.beams}
    seconds: dict[int, list[float]] = {beam: [] for beam in args.beams}
    clips = 0
    asked = questions(args.per_skill, args.seed)
    for number, question in enumerate(asked):
        for speaker in SPEAKERS:
            clean = as_utterance(speaker.say(question))
            for audio in (clean, with_noise(clean, SNR_DB)):
                clips += 1
                for beam, transcriber in transcribers.items():
                    start = time.perf_counter()
                    readings = transcriber.hypotheses(audio, count=beam)
                    seconds[beam].append(time.perf_counter() - start)
                    if not readings:
                        continue

                    def kept(text: str, question: str = question) -> bool:
                        return not missing_content(question, spoken_numbers_to_digits(text))

                    tally = intact[beam]
                    tally["first"] += kept(readings[0][0])
                    tally["any"] += any(kept(text) for text, _ in readings)
                    for weight in args.weights:
                        chosen = max(
                            readings,
                            key=lambda r, w=weight: (
                                r[1] + w * questions_model.score(r[0]) if r[0] else float("-inf")
                            ),
                        )
                        tally[f"{weight:g}"] += kept(chosen[0])
        print(f"{number + 1}/{len(asked)} questions", flush=True)
    reference = statistics.median(seconds[args.beams[0]])
    weights = [f"{w:g}" for w in args.weights]
    header = ["beam", "Whisper's first", *(f"rescored {w}" for w in weights), "any of them",
              "decoding × beam " + str(args.beams[0])]  # fmt: skip
    lines = ["| " + " | ".join(header) + " |", "|" + "---:|" * len(header)]
    for beam in args.beams:
        cells = [intact[beam][key] / clips for key in ["first", *weights, "any"]]
        ratio = statistics.median(seconds[beam]) / reference
        lines.append(f"| {beam} | " + " | ".join(f"{c:.1%}" for c in cells) + f" | {ratio:.2f} |")
    return f"{clips} clips, seed {args.seed}, {args.whisper}\n" + "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-skill", type=int, default=3, help="questions per skill")
    parser.add_argument("--seed", type=int, default=7, help="held-out draw (7: validation)")
    parser.add_argument("--beams", default="5,10,20", help="comma-separated beam widths")
    parser.add_argument("--weights", default="0.05,0.1,0.2", help="question model weights")
    parser.add_argument("--threads", type=int, default=1, help="Whisper's CPU threads")
    parser.add_argument(
        "--whisper", default="tiny.en-quicksilver", help="Whisper model (name or folder)"
    )
    args = parser.parse_args()
    args.beams = [int(b) for b in args.beams.split(",")]
    args.weights = [float(w) for w in args.weights.split(",")]
    print(run(args))


if __name__ == "__main__":
    main()
