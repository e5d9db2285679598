"""The reference client: one question to a running ``quicksilver serve``, its answer back.

It is as small as a client of the protocol can be, so it doubles as the example for
other languages: wait for ``session.created``, send typed text or stream PCM16 in 20 ms
chunks and commit, then read events until ``response.done``, keeping the audio deltas.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from quicksilver.ui.server.formats import SESSION_RATE, decode_audio, encode_audio
from websockets.asyncio.client import ClientConnection, connect

CHUNK_S = 0.02  # seconds of audio per input_audio_buffer.append


@dataclass
class Reply:
    """What came back for one question."""

    events: list[dict] = field(default_factory=list)
    audio: list[np.ndarray] = field(default_factory=list)
    sample_rate: int = 0

    @property
    def samples(self) -> np.ndarray:
        return np.concatenate(self.audio) if self.audio else np.zeros(0, np.float32)

    @property
    def done(self) -> dict | None:
        return next((e for e in self.events if e["type"] == "response.done"), None)

    @property
    def error(self) -> dict | None:
        return next((e for e in self.events if e["type"] == "error"), None)


def text_item(text: str) -> dict:
    """The message that asks a typed question."""
    content = [{"type": "input_text", "text": text}]
    item = {"type": "message", "role": "user", "content": content}
    return {"type": "conversation.item.create", "item": item}


def audio_chunks(samples: np.ndarray) -> list[dict]:
    """16 kHz float32 speech as ``input_audio_buffer.append`` messages of 20 ms."""
    size = int(CHUNK_S * SESSION_RATE)
    return [
        {"type": "input_audio_buffer.append", "audio": encode_audio(samples[i : i + size])}
        for i in range(0, len(samples), size)
    ]


def describe(event: dict) -> str:
    """One short line for an event: drafts and audio compact, the rest as JSON."""
    kind = event["type"]
    if kind == "response.draft":
        progress = f"{event['step']}/{event['total_steps']} masked={event['masked']}"
        return f"{kind} {progress} {event['text'][:60]!r}"
    if kind == "response.audio.delta":
        return f"{kind} {len(event['delta']) * 3 // 4 // 2} samples"
    rest = {k: v for k, v in event.items() if k not in ("type", "event_id")}
    return f"{kind} {json.dumps(rest)}"


async def ask(
    url: str,
    *,
    text: str | None = None,
    samples: np.ndarray | None = None,
    token: str | None = None,
    timeout: float = 120.0,
    on_event: Callable[[dict], None] = lambda event: None,
) -> Reply:
    """Ask one question (typed ``text`` or 16 kHz ``samples``) and read until the
    answer is done or an ``error`` comes; raises ``TimeoutError`` after ``timeout`` seconds."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return await asyncio.wait_for(_ask(url, headers, text, samples, on_event), timeout)


async def _ask(
    url: str,
    headers: dict[str, str] | None,
    text: str | None,
    samples: np.ndarray | None,
    on_event: Callable[[dict], None],
) -> Reply:
    async with connect(url, additional_headers=headers, max_size=None) as websocket:
        reply = Reply()
        created = await _next(websocket, reply, on_event)
        reply.sample_rate = created["session"]["output_sample_rate"]
        if text is not None:
            await websocket.send(json.dumps(text_item(text)))
        else:
            for chunk in audio_chunks(samples):
                await websocket.send(json.dumps(chunk))
            await websocket.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while reply.done is None and reply.error is None:
            event = await _next(websocket, reply, on_event)
            if event["type"] == "response.audio.delta":
                reply.audio.append(decode_audio(event["delta"]))
        return reply


async def _next(websocket: ClientConnection, reply: Reply, on_event: Callable) -> dict:
    event = json.loads(await websocket.recv())
    reply.events.append(event)
    on_event(event)
    return event
