"""What the user heard of an answer cut short: words in proportion to the seconds played."""

from __future__ import annotations

from quicksilver.assistant.playback import Playback
from quicksilver.audio.tts import spoken_pieces

ANSWER = "17 times 3 is 51. That is all."


def test_answers_are_spoken_as_normalised_sentences():
    assert spoken_pieces(ANSWER) == ["seventeen times three is fifty-one.", "That is all."]


def test_heard_words_follow_the_seconds_played():
    playback = Playback(ANSWER, start_s=10.0)  # the speaker had played 10 s before
    playback.queued("seventeen times three is fifty-one.", 2.0)
    playback.queued("That is all.", 1.5)
    everything = "seventeen times three is fifty-one. That is all."
    assert playback.heard(10.0) == ("", everything)
    assert playback.heard(11.0) == ("seventeen times", "three is fifty-one. That is all.")
    assert playback.heard(12.5) == ("seventeen times three is fifty-one. That", "is all.")
    assert playback.heard(20.0) == (everything, "")


def test_sentences_not_yet_synthesised_count_as_dropped():
    playback = Playback(ANSWER, start_s=0.0)
    playback.queued("seventeen times three is fifty-one.", 2.0)
    assert playback.heard(5.0) == ("seventeen times three is fifty-one.", "That is all.")
