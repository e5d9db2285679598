"""Audio for Quicksilver: microphone, voice activity, speech-to-text, Piper speech, speaker.

Imports nothing else of the project; each part is usable alone. Heavy libraries
(faster-whisper, Piper, onnxruntime, PortAudio) load only when a part is created.
"""

from quicksilver.audio.devices import (
    AudioDeviceError,
    DeviceInfo,
    Microphone,
    Speaker,
    list_devices,
)
from quicksilver.audio.streaming import FinalText, PartialText, StreamingTranscriber
from quicksilver.audio.stt import Segment, SttOptions, Transcriber
from quicksilver.audio.tts import SpeechChunk, Voice
from quicksilver.audio.vad import SpeechEnd, SpeechStart, VadConfig, VoiceActivity
from quicksilver.audio.wavfile import AudioFileError, read_wav, write_wav

__all__ = [
    "AudioDeviceError",
    "AudioFileError",
    "DeviceInfo",
    "FinalText",
    "Microphone",
    "PartialText",
    "Segment",
    "Speaker",
    "SpeechChunk",
    "SpeechEnd",
    "SpeechStart",
    "StreamingTranscriber",
    "SttOptions",
    "Transcriber",
    "VadConfig",
    "Voice",
    "VoiceActivity",
    "list_devices",
    "read_wav",
    "write_wav",
]
