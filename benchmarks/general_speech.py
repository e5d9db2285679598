"""Word error rate on everyday English that is not a question of the assistant's skills.

A Whisper fine-tuned on spoken questions (models/whisper_quicksilver) must not forget
how to write everything else: a name, a request the assistant refuses, a sentence of a
story. These sentences share no template with the training questions; each is said by
the spoken set's six voices, clean and with room noise at 20 dB SNR, and transcribed by
each model with the shipped decoding options (no question model: it knows only the
skills' questions). Words are compared lower-cased, without punctuation, numbers as
digits.

    python -m benchmarks.general_speech [--models tiny.en,tiny.en-quicksilver]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

from quicksilver.assistant.loading import resolve_whisper_model
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.synthetic_speech import as_utterance, with_noise
from quicksilver.audio.textnorm import spoken_numbers_to_digits
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken

from benchmarks.spoken_set import SPEAKERS

SENTENCES = (
    "Turn off the lights in the kitchen.",
    "Remind me to call my sister tomorrow morning.",
    "The weather was cold and rainy all week.",
    "Can you recommend a good book about history?",
    "My favourite colour is green.",
    "Play some quiet music while I read.",
    "The train to London leaves at half past seven.",
    "Who wrote the play Romeo and Juliet?",
    "I would like a cup of coffee with milk.",
    "Set a timer for the pasta.",
    "The children played football in the park.",
    "Tell me a story about a dragon.",
    "How far away is the moon?",
    "She bought three apples and a loaf of bread.",
    "Please send an email to my manager.",
    "What is the capital of Australia?",
    "The museum opens again next Monday.",
    "Thank you, that was very helpful.",
    "My name is Daniel and I live in Boston.",
    "Where can I find a good pharmacy nearby?",
)


def words(text: str) -> list[str]:
    """The words compared: as the engine would read them (``normalise_spoken``: lower case,
    numbers as digits, "seven" and "7" alike), British and American spellings as one."""
    text = normalise_spoken(spoken_numbers_to_digits(text))
    text = text.replace("favorite", "favourite").replace("color", "colour")
    return re.findall(r"[a-z0-9']+", text)


def edit_distance(reference: list[str], heard: list[str]) -> int:
    row = list(range(len(heard) + 1))
    for i, word in enumerate(reference, 1):
        previous, row[0] = row[0], i
        for j, other in enumerate(heard, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (word != other))
    return row[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny.en,tiny.en-quicksilver")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    models = args.models.split(",")
    transcribers = {
        name: Transcriber(resolve_whisper_model(name), device="cpu", cpu_threads=args.threads)
        for name in models
    }
    errors: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    total: dict[str, int] = defaultdict(int)
    examples: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for sentence in SENTENCES:
        reference = words(sentence)
        for speaker in SPEAKERS:
            clean = as_utterance(speaker.say(sentence))
            for audio in (clean, with_noise(clean, 20.0)):
                total[speaker.name] += len(reference)
                for name, transcriber in transcribers.items():
                    text = transcriber.transcribe(audio)
                    wrong = edit_distance(reference, words(text))
                    errors[name][speaker.name] += wrong
                    if wrong and len(examples[name]) < 12:
                        examples[name].append((sentence, text))
    voices = [s.name for s in SPEAKERS]
    print("| model | " + " | ".join(voices) + " | all |")
    print("|---|" + "---:|" * (len(voices) + 1))
    for name in models:
        cells = [f"{100 * errors[name][v] / total[v]:.1f}%" for v in voices]
        overall = 100 * sum(errors[name].values()) / sum(total.values())
        print(f"| {name} | " + " | ".join(cells) + f" | {overall:.1f}% |")
    for name in models:
        print(f"\n{name}, some errors:")
        for sentence, text in examples[name]:
            print(f"  {sentence!r} -> {text!r}")


if __name__ == "__main__":
    main()
