"""The answer's first piece is synthesised as soon as the denoising has settled it, and
used only if the finished answer begins with it (real engine, real Piper)."""

from __future__ import annotations

import pytest
from quicksilver.assistant.commands import SubmitText
from quicksilver.assistant.events import Denoise, SpeakingFinished, TurnMetrics
from quicksilver.assistant.playback import StreamOutput
from quicksilver.assistant.stages import Speak, settled_first_piece
from quicksilver.audio.tts import spoken_pieces
from quicksilver.engine import MASK_GLYPH

from tests.assistant.sessions import running, voice_session

M = MASK_GLYPH


@pytest.mark.parametrize(
    ("draft", "piece"),
    [
        (f"Hello! What{M}{M} I do for you?", "Hello!"),
        (
            f"I can do arithmetic, spell words, compare numbers, con{M}{M}",
            "I can do arithmetic, spell words,",
        ),
        ("17 times 3 is 51.", "seventeen times three is fifty-one."),  # nothing masked
    ],
)
def test_a_settled_first_piece_is_found_in_the_draft(draft, piece):
    assert settled_first_piece(draft) == piece


@pytest.mark.parametrize(
    "draft",
    [
        f"I'm Quicksilver, a voice{M}",  # the cut at the comma depends on what follows
        f"17 times 3 is 5{M}.",  # the number may still grow
        f"17 times 3 is 51.{M}",  # the next piece has not begun: a space may not follow
        f"{M}{M} is spelled D, O, G.",
        f"{M}{M}{M}",
        "",
    ],
)
def test_an_unsettled_first_piece_is_not_guessed(draft):
    assert settled_first_piece(draft) is None


@pytest.mark.asyncio
async def test_a_rehearsal_is_used_only_when_the_answer_begins_with_it(voice):
    speak = Speak(voice, StreamOutput(voice.sample_rate, lambda samples: None))
    answer = "Hello! What can I do for you?"

    rehearsal = speak.rehearse("Hello!")
    speech = await speak.prepare(answer, rehearsal)
    assert speech.rehearsed and speech.first is rehearsal.chunk.result()
    assert [speech.first.text, *(c.text for c in speech.chunks)] == spoken_pieces(answer)

    wrong = speak.rehearse("Hi!")
    speech = await speak.prepare(answer, wrong)
    assert not speech.rehearsed and (await wrong.chunk).text == "Hi!"
    assert [speech.first.text, *(c.text for c in speech.chunks)] == spoken_pieces(answer)


@pytest.mark.asyncio
async def test_the_first_piece_is_made_before_the_last_step_and_the_answer_said_whole(
    reasoner, transcriber, voice
):
    said = {}
    for ahead in (True, False):
        session, _, _ = voice_session(reasoner, transcriber, voice, voice_ahead=ahead)
        async with running(session) as events:
            session.send(SubmitText("what is seventeen times three"))
            finished = await events.wait_for(SpeakingFinished, timeout=60)
            metrics = await events.wait_for(TurnMetrics)
        drafts = events.of(Denoise)
        assert metrics.voice_ahead is ahead
        said[ahead] = finished.text
    # the shipped model settles "17 times 3 is 51." well before its last step
    assert any(settled_first_piece(d.text) for d in drafts[:-1])
    assert said[True] == said[False] == " ".join(spoken_pieces(drafts[-1].text))
