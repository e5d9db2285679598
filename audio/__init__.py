"""Audio for Quicksilver: microphone, voice activity, speech-to-text, Piper speech, speaker.

Imports nothing else of the project; each part is usable alone.
"""
