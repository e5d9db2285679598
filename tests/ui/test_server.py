"""The websocket service, for real: a server on 127.0.0.1 with the shipped models and
real websockets clients. Every wait is bounded, so a bug fails fast instead of hanging."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import numpy as np
import pytest
import pytest_asyncio
from quicksilver.assistant.config import Settings
from quicksilver.ui.server.client import ask, audio_chunks, text_item
from quicksilver.ui.server.service import Models, ServerConfig, Service
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus

pytestmark = pytest.mark.asyncio

TURN_S = 120.0  # the slowest a whole turn may take on this machine's CPU


@pytest_asyncio.fixture
async def service(reasoner, transcriber, voice, tmp_path) -> AsyncIterator[Service]:
    settings = Settings(steps=8, log_path=tmp_path / "log.jsonl")
    config = ServerConfig(port=0, token="secret", allow_origins=("http://booth.example",))
    async with Service(settings, config, Models(reasoner, transcriber, voice)) as running:
        yield running


def url(service: Service) -> str:
    return f"{service.url}/?token=secret"


async def receive(websocket: ClientConnection, timeout: float = 10.0) -> dict:
    return json.loads(await asyncio.wait_for(websocket.recv(), timeout))


async def receive_until(websocket: ClientConnection, kind: str, timeout: float) -> list[dict]:
    """Every event up to and including the first of type ``kind``."""
    events: list[dict] = []

    async def collect() -> None:
        while not events or events[-1]["type"] != kind:
            events.append(json.loads(await websocket.recv()))

    await asyncio.wait_for(collect(), timeout)
    return events


async def test_a_typed_turn_is_answered_draft_by_draft_with_audio(service: Service):
    reply = await ask(service.url, text="what is 17 times 3", token="secret", timeout=TURN_S)
    kinds = [event["type"] for event in reply.events]
    assert kinds[0] == "session.created"
    assert reply.sample_rate == service.models.voice.sample_rate
    assert kinds.index("conversation.item.created") < kinds.index("response.created")
    drafts = [event for event in reply.events if event["type"] == "response.draft"]
    assert [draft["step"] for draft in drafts] == list(range(1, 9))
    assert {draft["total_steps"] for draft in drafts} == {8}
    assert drafts[0]["masked"] > drafts[-1]["masked"] == 0
    text = next(event["text"] for event in reply.events if event["type"] == "response.text.done")
    assert "51" in text
    assert kinds.index("response.text.done") < kinds.index("response.audio.delta")
    assert kinds.index("response.audio.done") < kinds.index("response.done")
    assert reply.samples.size > reply.sample_rate // 2  # more than half a second of speech
    response = reply.done["response"]
    assert response["status"] == "completed" and response["text"] == text
    assert response["timings"]["engine_ms"] > 0


async def test_a_voice_turn_streamed_faster_than_real_time_is_answered(service: Service, espeak):
    speech = espeak("what is 17 times 3")
    silence = np.zeros(16000, np.float32)  # more than the VAD's hang-over
    async with connect(url(service)) as websocket:
        assert (await receive(websocket))["type"] == "session.created"
        for chunk in audio_chunks(np.concatenate([speech, silence])):
            await websocket.send(json.dumps(chunk))
            await asyncio.sleep(0.005)  # a quarter of real time
        events = await receive_until(websocket, "response.done", TURN_S)
    kinds = [event["type"] for event in events]
    assert "input_audio_buffer.speech_started" in kinds
    heard = next(
        event["transcript"]
        for event in events
        if event["type"] == "conversation.item.input_audio_transcription.completed"
    )
    assert "17" in heard or "seventeen" in heard.lower()
    assert "response.draft" in kinds and "response.audio.delta" in kinds
    assert events[-1]["response"]["status"] == "completed"
    assert events[-1]["response"]["timings"]["transcript_ms"] is not None


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{not json", "invalid_json"),
        (json.dumps({"type": "response.dance", "event_id": "e1"}), "unknown_type"),
        (json.dumps({"type": "input_audio_buffer.append", "audio": "%%%"}), "invalid_audio"),
        (json.dumps({"type": "conversation.item.create", "item": {}}), "missing_field"),
    ],
)
async def test_a_bad_message_gets_an_error_and_the_connection_goes_on(
    service: Service, message: str, code: str
):
    async with connect(url(service)) as websocket:
        await receive(websocket)  # session.created
        await websocket.send(message)
        error = await receive(websocket)
        assert error["type"] == "error" and error["error"]["code"] == code
        assert error["error"]["message"]
        if code == "unknown_type":
            assert error["error"]["event_id"] == "e1"
        await websocket.send(json.dumps({"type": "session.update", "session": {"steps": 4}}))
        assert (await receive(websocket))["session"] == {"steps": 4}


async def test_a_wrong_token_and_a_foreign_origin_are_refused(service: Service):
    with pytest.raises(ValueError, match="--token"):
        ServerConfig(host="0.0.0.0").check()  # binding beyond this machine needs one
    for address, origin in [
        (f"{service.url}/?token=wrong", None),
        (service.url, None),
        (url(service), "http://evil.example"),
    ]:
        with pytest.raises(InvalidStatus) as refusal:
            await asyncio.wait_for(connect(address, origin=origin), 10)
        assert refusal.value.response.status_code in (401, 403)
    assert not service._connections  # refused before any session was built
    allowed = await asyncio.wait_for(connect(url(service), origin="http://booth.example"), 10)
    async with allowed:
        assert (await receive(allowed))["type"] == "session.created"


async def test_a_client_gone_mid_answer_does_not_stop_the_server(service: Service):
    async with connect(url(service)) as websocket:
        await receive(websocket)
        await websocket.send(json.dumps(text_item("what is 17 times 3")))
        await receive_until(websocket, "response.draft", TURN_S)

    async def released() -> None:
        while service._connections:  # its session was stopped and closed
            await asyncio.sleep(0.05)

    await asyncio.wait_for(released(), 30)
    reply = await ask(service.url, text="what is 2 plus 2", token="secret", timeout=TURN_S)
    assert reply.done["response"]["status"] == "completed"
