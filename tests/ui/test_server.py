"""The websocket service, for real: a server on 127.0.0.1 with the shipped models and
real websockets clients. Every wait is bounded, so a bug fails fast instead of hanging."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import socket
import ssl
import subprocess
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytest_asyncio
from quicksilver.assistant.config import Settings
from quicksilver.audio.resample import resample
from quicksilver.audio.textnorm import int_to_words
from quicksilver.ui.server.client import CHUNK_S, ask, audio_chunks, text_item
from quicksilver.ui.server.config import ServerConfig
from quicksilver.ui.server.formats import ulaw_encode
from quicksilver.ui.server.service import Models, Service
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

pytestmark = pytest.mark.asyncio

TURN_S = 120.0  # the slowest a whole turn may take on this machine's CPU


@pytest.fixture
def models(reasoner, transcriber, voice) -> Models:
    return Models(reasoner, transcriber, voice)


def server(models: Models, tmp_path: Path, **limits: Any) -> Service:
    """A service on a free port with the test token; ``limits`` are ServerConfig fields."""
    settings = Settings(steps=8, log_path=tmp_path / "log.jsonl")
    origins = ("http://booth.example",)
    return Service(
        settings, ServerConfig(port=0, token="secret", allow_origins=origins, **limits), models
    )


@pytest_asyncio.fixture
async def service(models: Models, tmp_path: Path) -> AsyncIterator[Service]:
    async with server(models, tmp_path) as running:
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


@pytest.mark.parametrize("pace", [1.0, 0.25], ids=["real-time", "four-times-faster"])
async def test_a_voice_turn_streamed_in_20_ms_chunks_is_answered(
    service: Service, espeak, pace: float
):
    speech = espeak("what is 17 times 3")
    silence = np.zeros(16000, np.float32)  # more than the VAD's hang-over
    async with connect(url(service)) as websocket:
        assert (await receive(websocket))["type"] == "session.created"
        started = asyncio.get_running_loop().time()
        for number, chunk in enumerate(audio_chunks(np.concatenate([speech, silence]))):
            await websocket.send(json.dumps(chunk))
            due = started + (number + 1) * CHUNK_S * pace  # sent no faster than its pace
            await asyncio.sleep(max(0.0, due - asyncio.get_running_loop().time()))
        events = await receive_until(websocket, "response.done", TURN_S)
    kinds = [event["type"] for event in events]
    assert "input_audio_buffer.speech_started" in kinds
    completed = kinds.index("conversation.item.input_audio_transcription.completed")
    assert kinds.index("input_audio_buffer.speech_stopped") == completed - 1
    assert events[completed - 1]["item_id"] == events[completed]["item_id"]
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


async def test_response_create_is_accepted_and_adds_no_second_answer(service: Service):
    async with connect(url(service)) as websocket:
        await receive(websocket)
        await websocket.send(json.dumps(text_item("what is 2 plus 2")))
        await websocket.send(json.dumps({"type": "response.create", "event_id": "e2"}))
        events = await receive_until(websocket, "response.done", TURN_S)
        assert [e["type"] for e in events].count("response.created") == 1
        assert not [e for e in events if e["type"] == "error"]
        await still_serves(websocket)  # the next message answers this, not a new response


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


async def still_serves(websocket: ClientConnection) -> None:
    """The connection answers a message: the server was not held up."""
    await websocket.send(json.dumps({"type": "session.update", "session": {"steps": 4}}))
    assert (await receive(websocket))["type"] == "session.updated"


async def released(service: Service, left: int = 0) -> None:
    """Wait (bounded) until only ``left`` connections hold sessions."""

    async def wait() -> None:
        while len(service._connections) > left:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(wait(), 30)


async def test_an_oversized_message_closes_only_its_connection(models: Models, tmp_path: Path):
    async with server(models, tmp_path, max_message_bytes=4096) as service:
        async with connect(url(service)) as big, connect(url(service)) as other:
            await receive(big)
            await receive(other)
            speech = np.zeros(4000, np.float32)  # 8000 bytes of PCM16, more in base64
            await big.send(json.dumps(audio_chunks(speech)[0] | {"audio": "A" * 8000}))
            with pytest.raises(ConnectionClosed):
                await receive(big)
            assert big.close_code == 1009
            assert "exceeds limit of 4096 bytes" in big.close_reason
            await still_serves(other)
        async with connect(url(service)) as later:
            assert (await receive(later))["type"] == "session.created"


async def test_a_client_beyond_max_clients_is_refused_and_the_others_go_on(
    models: Models, tmp_path: Path
):
    async with server(models, tmp_path, max_clients=2) as service:
        first = await asyncio.wait_for(connect(url(service)), 10)
        async with connect(url(service)) as second:
            await receive(first)
            await receive(second)
            with pytest.raises(InvalidStatus) as refusal:
                await asyncio.wait_for(connect(url(service)), 10)
            assert refusal.value.response.status_code == 503
            assert b"the server is full (2 clients)" in refusal.value.response.body
            await still_serves(first)
            await still_serves(second)
            await first.close()
            await released(service, left=1)
            async with connect(url(service)) as third:  # a freed place is taken again
                assert (await receive(third))["type"] == "session.created"


async def test_an_idle_connection_is_closed_with_a_reason(models: Models, tmp_path: Path):
    async with server(models, tmp_path, idle_timeout_s=0.5) as service:
        async with connect(url(service)) as idle, connect(url(service)) as busy:
            await receive(idle)
            await receive(busy)
            for _ in range(5):  # 1 s of messages, 0.2 s apart: never idle
                await still_serves(busy)
                await asyncio.sleep(0.2)
            assert busy.close_code is None
            await asyncio.wait_for(idle.wait_closed(), 10)
            assert idle.close_code == 1000
            assert idle.close_reason == "idle for 0.5 s: nothing sent or received"
        await released(service)


async def test_a_client_that_never_reads_is_dropped_and_the_others_are_served(
    models: Models, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.WARNING, logger="quicksilver.ui.server.service")
    async with server(models, tmp_path, send_queue=4) as service:
        # small socket buffers both ends (the kernel would otherwise absorb megabytes) and
        # a one-message client queue: the answers' audio piles up in the server's queue
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.connect(("127.0.0.1", service.port))
        stuck.setblocking(False)
        async with connect(url(service), sock=stuck, max_queue=1) as deaf:
            (server_side,) = service._connections
            sending = server_side.transport.get_extra_info("socket")
            sending.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            for question in ("what is 17 times 3", "what is 2 plus 2", "what is 9 minus 4"):
                await deaf.send(json.dumps(text_item(question)))
            reply = await ask(service.url, text="what is 5 plus 5", token="secret", timeout=TURN_S)
            assert reply.done["response"]["status"] == "completed"
            await released(service)
        assert "reads too slowly" in caplog.text


async def test_twenty_clients_three_turns_each_are_all_answered(models: Models, tmp_path: Path):
    clients, turns = 20, 3

    async def converse(number: int) -> list[dict]:
        async with connect(url(service), max_size=None) as websocket:
            await receive(websocket, timeout=60)
            done = []
            for turn in range(turns):
                question = f"what is {number} plus {turn + 1}"
                await websocket.send(json.dumps(text_item(question)))
                done.append((await receive_until(websocket, "response.done", TURN_S))[-1])
            return done

    async with server(models, tmp_path, max_clients=clients) as service:
        answers = await asyncio.wait_for(
            asyncio.gather(*(converse(number) for number in range(clients))), 180
        )
    assert len(answers) == clients
    for done in answers:  # every turn answered, in order, none lost
        assert [d["response"]["id"] for d in done] == ["resp_1", "resp_2", "resp_3"]
        assert all(d["response"]["status"] == "completed" and d["response"]["text"] for d in done)
    steps = sum(d["response"]["timings"]["steps"] for done in answers for d in done)
    assert service.scheduler.passes < steps  # turns that overlapped shared passes


@pytest.mark.parametrize("max_batch", [1, 4])
async def test_turns_from_several_clients_share_the_engines_passes_up_to_max_batch(
    models: Models, tmp_path: Path, max_batch: int
):
    async def ask(websocket: ClientConnection, number: int) -> list[dict]:
        await websocket.send(json.dumps(text_item(f"what is {number} plus 1")))
        return await receive_until(websocket, "response.done", TURN_S)

    service = server(models, tmp_path, max_batch=max_batch)
    async with service, contextlib.AsyncExitStack() as stack:  # all connected before any asks
        clients = [await stack.enter_async_context(connect(url(service))) for _ in range(4)]
        for websocket in clients:
            await receive(websocket, timeout=60)
        turns = await asyncio.wait_for(
            asyncio.gather(*(ask(ws, n) for n, ws in enumerate(clients))), 120
        )
    assert all(events[-1]["response"]["status"] == "completed" for events in turns)
    answers = [next(e for e in events if e["type"] == "response.text.done") for events in turns]
    steps = [answer["steps"] for answer in answers]
    # a routed engine's router runs once per turn, outside the batches: its passes are
    # each answer's forward passes beyond its steps
    routing = sum(answer["forward_passes"] - answer["steps"] for answer in answers)
    denoising = service.scheduler.passes - routing
    if max_batch == 1:  # a fair queue, one turn at a time: a pass per step of each
        assert denoising == sum(steps)
    else:  # four turns asked at once are denoised together
        assert max(steps) <= denoising < sum(steps)


async def audio_seconds(websocket: ClientConnection, question: str, bytes_per_s: int) -> float:
    """Ask ``question``; how long its answer audio lasts at ``bytes_per_s``."""
    await websocket.send(json.dumps(text_item(question)))
    events = await receive_until(websocket, "response.done", TURN_S)
    deltas = [e["delta"] for e in events if e["type"] == "response.audio.delta"]
    return sum(len(base64.b64decode(delta)) for delta in deltas) / bytes_per_s


async def test_each_connection_chooses_its_audio_formats(service: Service, espeak):
    speech = resample(espeak("what is 17 times 3"), 16000, 8000)
    pcm = (np.clip(speech, -1, 1) * 32767).round().astype(np.int16)
    telephone = ulaw_encode(np.concatenate([pcm, np.zeros(8000, np.int16)]))  # + 1 s silence
    async with connect(url(service)) as websocket:
        created = (await receive(websocket))["session"]
        voice_rate = created["output_sample_rate"]
        plain_s = await audio_seconds(websocket, "what is 17 times 3", 2 * voice_rate)
        update = {"input_audio_format": "g711_ulaw", "output_audio_format": "g711_alaw"}
        await websocket.send(json.dumps({"type": "session.update", "session": update}))
        updated = (await receive(websocket))["session"]
        assert updated == {
            "voice": created["voice"],
            "input_audio_format": "g711_ulaw", "input_sample_rate": 8000,
            "output_audio_format": "g711_alaw", "output_sample_rate": 8000,
        }  # fmt: skip
        alaw_s = await audio_seconds(websocket, "what is 17 times 3", 8000)
        for i in range(0, len(telephone), 160):  # 20 ms of 8 kHz G.711
            chunk = base64.b64encode(telephone[i : i + 160]).decode()
            await websocket.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        events = await receive_until(websocket, "response.done", TURN_S)
    heard = next(e["transcript"] for e in events if e["type"].endswith("transcription.completed"))
    assert "17" in heard or "seventeen" in heard.lower()
    assert plain_s > 0.5 and abs(alaw_s / plain_s - 1) < 0.25  # the same answer, 8 kHz


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"input_audio_format": "opus"}, "not one of pcm16, g711_ulaw, g711_alaw"),
        ({"output_sample_rate": 96000}, "8000–48000 Hz"),
        ({"input_sample_rate": "fast"}, "input_sample_rate must be a whole number of Hz"),
        ({"voice": "en_GB-nobody-low"}, "this server speaks with en_US-joe-medium"),
        ({"model": "other"}, "cannot change model on a live session"),
    ],
)
async def test_a_session_update_that_cannot_be_done_changes_nothing(
    service: Service, change: dict, message: str
):
    async with connect(url(service)) as websocket:
        created = (await receive(websocket))["session"]
        update = {"type": "session.update", "event_id": "u1", "session": {"steps": 4, **change}}
        await websocket.send(json.dumps(update))
        error = await receive(websocket)
        assert error["type"] == "error" and error["error"]["code"] == "invalid_field"
        assert message in error["error"]["message"]
        await websocket.send(json.dumps(text_item("what is 2 plus 2")))
        events = await receive_until(websocket, "response.done", TURN_S)
    assert events[-1]["response"]["timings"]["steps"] == created["steps"]  # not 4
    deltas = [e["delta"] for e in events if e["type"] == "response.audio.delta"]
    assert deltas and len(base64.b64decode(deltas[0])) % 2 == 0  # still PCM16


async def test_instructions_from_session_update_reach_the_model(service: Service):
    async def prompt_tokens(websocket: ClientConnection) -> int:
        await websocket.send(json.dumps(text_item("what is 2 plus 2")))
        events = await receive_until(websocket, "response.done", TURN_S)
        return next(e["prompt_tokens"] for e in events if e["type"] == "response.text.done")

    async with connect(url(service)) as websocket:
        await receive(websocket)
        await websocket.send(json.dumps({"type": "session.update",
                                         "session": {"instructions": "Be brief.",
                                                     "max_turns": 0}}))  # fmt: skip
        updated = await receive(websocket)
        assert updated["session"] == {"instructions": "Be brief.", "max_turns": 0}
        instructed = await prompt_tokens(websocket)
        await websocket.send(json.dumps({"type": "session.update",
                                         "session": {"instructions": None}}))  # fmt: skip
        assert (await receive(websocket))["session"] == {"instructions": None}
        assert await prompt_tokens(websocket) < instructed


async def test_a_spoken_turn_is_cut_at_thirty_seconds_and_the_rest_is_a_new_turn(
    service: Service, espeak
):
    speech = espeak(" ".join(int_to_words(n) for n in range(21, 66)))  # counting, no pause
    assert speech.size >= 33 * 16000
    async with connect(url(service), max_size=None) as websocket:
        await receive(websocket)
        for chunk in audio_chunks(np.concatenate([speech, np.zeros(16000, np.float32)])):
            await websocket.send(json.dumps(chunk))  # as fast as it goes: under the 60 s cap
        events: list[dict] = []

        async def two_turns_heard() -> None:
            while sum(e["type"] == "input_audio_buffer.speech_started" for e in events) < 2:
                events.append(await receive(websocket, TURN_S))

        await asyncio.wait_for(two_turns_heard(), TURN_S)
    started = [e["item_id"] for e in events if e["type"] == "input_audio_buffer.speech_started"]
    assert started == ["item_1", "item_2"]  # 33+ s with no pause: two turns, cut at 30 s


async def test_each_connection_keeps_a_transcript_log_of_its_own(service: Service, tmp_path):
    for question in ("what is 17 times 3", "what is 2 plus 2"):
        async with connect(url(service)) as websocket:
            await receive(websocket)
            await websocket.send(json.dumps(text_item(question)))
            await receive_until(websocket, "response.done", TURN_S)

    def users() -> dict[str, list[str]]:
        """Each connection's log (by session id) and the questions in it."""
        return {
            path.name.rsplit("-", 1)[1]: [json.loads(line)["user"] for line in
                                          path.read_text().splitlines()]
            for path in (tmp_path / "connections").glob("*.jsonl")
        }  # fmt: skip

    for _ in range(100):  # the writers append from their own threads
        if sum(map(len, users().values())) == 2:
            break
        await asyncio.sleep(0.05)
    assert users() == {
        "sess_1.jsonl": ["what is 17 times 3"], "sess_2.jsonl": ["what is 2 plus 2"]
    }  # fmt: skip


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, made with openssl."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


async def test_with_a_certificate_the_page_and_the_websocket_are_served_over_tls(
    models: Models, tmp_path: Path, certificate: tuple[Path, Path]
):
    cert, key = certificate
    trusted = ssl.create_default_context(cafile=cert)
    async with server(models, tmp_path, certfile=cert, keyfile=key) as service:
        assert service.url.startswith("wss://")
        page = f"https://127.0.0.1:{service.port}/"
        with await asyncio.to_thread(
            urllib.request.urlopen, page, context=trusted, timeout=10
        ) as r:
            assert b"Quicksilver" in r.read()
        own = {"Origin": f"https://127.0.0.1:{service.port}"}
        async with connect(url(service), ssl=trusted, additional_headers=own) as websocket:
            assert (await receive(websocket))["type"] == "session.created"
        with pytest.raises(InvalidStatus) as refused:  # the plain-http page is another origin
            plain = {"Origin": f"http://127.0.0.1:{service.port}"}
            async with connect(url(service), ssl=trusted, additional_headers=plain):
                pass
        assert refused.value.response.status_code == 403


async def test_beyond_loopback_a_page_from_the_address_reached_is_the_servers_own(
    models: Models, tmp_path: Path
):
    async with server(models, tmp_path, host="0.0.0.0") as service:
        address = f"ws://127.0.0.1:{service.port}/?token=secret"
        reached = {"Origin": f"http://127.0.0.1:{service.port}"}  # a phone's page, say
        async with connect(address, additional_headers=reached) as websocket:
            assert (await receive(websocket))["type"] == "session.created"
        with pytest.raises(InvalidStatus) as refused:
            async with connect(address, additional_headers={"Origin": "http://evil.example"}):
                pass
        assert refused.value.response.status_code == 403
