"""The realtime websocket service: one set of models, one session per connection.

Loading the engine, Whisper and the voice takes seconds and memory, so they are loaded
once and shared; the engine answers every connection through one continuous-batching
scheduler (a fair queue, and one forward pass a step for all the turns denoising at
once). Each connection gets its own session (its own memory, and its own transcript
log unless ``log`` is off) whose microphone is the audio the client pushes and whose
output turns played answers into ``response.audio.delta`` messages. Everything a
connection sends goes through a bounded queue drained by its own task, so a client that
reads slowly is dropped instead of delaying the session or the other clients; one that
goes quiet is closed after ``idle_timeout_s``. Audio per turn needs no limit of its own here: the
voice activity detector cuts an utterance at 30 s (``VadConfig.max_utterance_s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import itertools
import json
import logging
import queue
import ssl
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import numpy as np
from quicksilver.assistant.commands import Mute, Unmute, UpdateSettings
from quicksilver.assistant.config import Settings
from quicksilver.assistant.factory import build_session
from quicksilver.assistant.loading import load_turn_model
from quicksilver.assistant.playback import StreamOutput
from quicksilver.assistant.session import Session
from quicksilver.assistant.transcript import default_log_path
from quicksilver.assistant.wiring import Wiring
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.turn import SmartTurn
from quicksilver.engine import Engine
from quicksilver.engine.routing import RoutedScheduler, scheduler_for
from quicksilver.engine.scheduler import Scheduler
from quicksilver.ui.server.config import LOOPBACK, ServerConfig
from quicksilver.ui.server.formats import SESSION_RATE, AudioFormat, Formats, chosen_format
from quicksilver.ui.server.page import page_response, wants_websocket
from quicksilver.ui.server.protocol import (
    Append,
    Clear,
    Commit,
    CreateResponse,
    ProtocolError,
    Translator,
    UpdateSession,
    error_message,
    parse,
)
from quicksilver.ui.server.sharing import ScheduledEngine
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

log = logging.getLogger(__name__)
IDLE_READ_S = 0.1  # how long the ear waits for pushed audio before it looks up
SLOW_READER = 1008  # close code (policy violation) for a client whose queue overflowed
IDLE = 1000  # close code (normal closure) for a connection idle past idle_timeout_s


@dataclass(frozen=True)
class Models:
    """What every connection's session shares."""

    engine: Engine
    transcriber: Transcriber
    voice: Voice
    turn: SmartTurn | None = None  # loaded by the service when semantic turns are on


class PushMicrophone:
    """A frame source fed by the client: :meth:`read` returns the pushed frames in order
    and raises :class:`AudioDeviceError` once closed."""

    def __init__(self, max_buffered_s: float) -> None:
        self._frames: queue.Queue[np.ndarray | None] = queue.Queue()
        self._limit = int(max_buffered_s * SESSION_RATE)
        self._buffered = 0
        self._lock = threading.Lock()

    def push(self, samples: np.ndarray) -> bool:
        """Queue audio for the ear; False (nothing queued) when too much is waiting."""
        with self._lock:
            if self._buffered + samples.size > self._limit:
                return False
            self._buffered += samples.size
        self._frames.put(samples)
        return True

    def clear(self) -> None:
        """Drop the audio not yet read."""
        while True:
            try:
                frame = self._frames.get_nowait()
            except queue.Empty:
                return
            if frame is None:  # closed: keep the mark for read
                self._frames.put(None)
                return
            self._taken(frame)

    def read(self) -> np.ndarray:
        """The next frame; an empty one when the client sent nothing for ``IDLE_READ_S``
        (so the ear still ends a turn whose verdict came after the client's audio)."""
        try:
            frame = self._frames.get(timeout=IDLE_READ_S)
        except queue.Empty:
            return np.zeros(0, np.float32)
        if frame is None:
            self._frames.put(None)
            raise AudioDeviceError("the client has disconnected")
        self._taken(frame)
        return frame

    def close(self) -> None:
        """No more audio: what was not heard yet is dropped (its client has gone)."""
        self.clear()
        self._frames.put(None)

    def _taken(self, frame: np.ndarray) -> None:
        with self._lock:
            self._buffered -= frame.size


class Service:
    """The websocket server; ``async with Service(...) as service`` listens on
    ``service.port`` until the block ends."""

    def __init__(self, settings: Settings, config: ServerConfig, models: Models) -> None:
        config.check()
        self.settings = settings
        self.config = config
        self.models = models
        self.port = config.port
        self._origins: frozenset[str] = frozenset()
        self._connections: set[ServerConnection] = set()  # admitted, handshake on or done
        self._ids = itertools.count(1)
        self._server: Server | None = None
        self.scheduler: Scheduler | RoutedScheduler | None = None  # runs while the service listens
        self.turn_model = models.turn
        if self.turn_model is None and settings.semantic_turns:
            self.turn_model = load_turn_model(settings.threads)

    async def __aenter__(self) -> Service:
        self.scheduler = scheduler_for(self.models.engine, max_batch=self.config.max_batch)
        self._server = await serve(
            self._connection,
            self.config.host,
            self.config.port,
            process_request=self._admit,
            max_size=self.config.max_message_bytes,
            ssl=_tls_context(self.config),
        )
        self.port = self._server.sockets[0].getsockname()[1]
        hosts = LOOPBACK if self.config.host in LOOPBACK else {self.config.host}
        own = {self._origin(host) for host in hosts}
        self._origins = frozenset(own | set(self.config.allow_origins))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._server.close()
        await self._server.wait_closed()
        self.scheduler.close()

    async def serve_forever(self) -> None:
        await self._server.serve_forever()

    @property
    def url(self) -> str:
        scheme = "wss" if self.config.tls else "ws"
        return f"{scheme}://{self.config.host}:{self.port}"

    @property
    def _scheme(self) -> str:
        return "https" if self.config.tls else "http"

    def _origin(self, host: str) -> str:
        """The origin of a page served from ``host`` on this port."""
        host = f"[{host}]" if ":" in host else host
        return f"{self._scheme}://{host}:{self.port}"

    # ------------------------------------------------------------------ admission

    def _admit(self, connection: ServerConnection, request: Request) -> Response | None:
        """Refuse before any work: a wrong token, a foreign page, too many clients.
        A plain HTTP request (no upgrade) gets the browser page instead."""
        if not wants_websocket(request):
            return page_response(request)
        if self.config.token is not None and not self._token_ok(request):
            return connection.respond(
                HTTPStatus.UNAUTHORIZED,
                "a valid token is required: Authorization: Bearer TOKEN or ?token=TOKEN\n",
            )
        origin = request.headers.get("Origin")
        if origin is not None and not self._origin_allowed(origin, request):
            return connection.respond(
                HTTPStatus.FORBIDDEN, f"origin {origin} is not allowed (see --allow-origin)\n"
            )
        self._connections -= {c for c in self._connections if c.state is State.CLOSED}
        if len(self._connections) >= self.config.max_clients:
            return connection.respond(
                HTTPStatus.SERVICE_UNAVAILABLE,
                f"the server is full ({self.config.max_clients} clients); try again later\n",
            )
        self._connections.add(connection)  # counted now: handshakes run side by side
        return None

    def _origin_allowed(self, origin: str, request: Request) -> bool:
        """The server's own pages and ``--allow-origin`` ones. On loopback "own" is a
        fixed list (a page on another site that rebinds its name to 127.0.0.1 is not
        own); beyond loopback the token guards the door, so a page from whatever address
        the server was reached at (a phone on the LAN) is its own."""
        if origin in self._origins:
            return True
        reached = request.headers.get("Host", "")
        return self.config.host not in LOOPBACK and origin == f"{self._scheme}://{reached}"

    def _token_ok(self, request: Request) -> bool:
        header = request.headers.get("Authorization", "")
        given = header.removeprefix("Bearer ").strip() if header.startswith("Bearer ") else ""
        if not given:
            given = parse_qs(urlsplit(request.path).query).get("token", [""])[0]
        return hmac.compare_digest(given.encode(), self.config.token.encode())

    # ------------------------------------------------------------------ one client

    async def _connection(self, websocket: ServerConnection) -> None:
        try:
            await Connection(self, websocket).run()
        finally:
            self._connections.discard(websocket)


def _tls_context(config: ServerConfig) -> ssl.SSLContext | None:
    if not config.tls:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(config.certfile, config.keyfile)
    return context


class Connection:
    """One client: its session, its microphone, its bounded outbox."""

    def __init__(self, service: Service, websocket: ServerConnection) -> None:
        self.service = service
        self.websocket = websocket
        self.id = f"sess_{next(service._ids)}"
        self.outbox: asyncio.Queue[dict] = asyncio.Queue(service.config.send_queue)
        self.translator = Translator()
        self.microphone = PushMicrophone(service.config.max_buffered_s)
        models = service.models
        voice_rate = models.voice.sample_rate
        self.formats = Formats(output=AudioFormat("pcm16", voice_rate), voice_rate=voice_rate)
        output = StreamOutput(models.voice.sample_rate, self._audio)
        self.session: Session = build_session(
            self._settings(),
            Wiring(log=service.config.log),
            engine=ScheduledEngine(service.scheduler),
            transcriber=models.transcriber,
            voice=models.voice,
            microphone=self.microphone,
            output=output,
            turn_model=service.turn_model,
        )
        self._dropping: asyncio.Task | None = None
        self._active_at = asyncio.get_running_loop().time()  # last message either way

    def _settings(self) -> Settings:
        """The service's settings, with this connection's own transcript log: a file
        named by when it connected and its id, so no two connections share one."""
        settings, config = self.service.settings, self.service.config
        if not config.log:
            return settings
        folder = config.log_dir or (settings.log_path or default_log_path()).parent / "connections"
        name = f"{time.strftime('%Y%m%d-%H%M%S')}-{self.id}.jsonl"
        return dataclasses.replace(settings, log_path=folder / name)

    async def run(self) -> None:
        """Serve the client until it goes; then stop its session and release it."""
        self.session.subscribe(lambda event: self._post(self.translator.messages(event)))
        sender = asyncio.create_task(self._send())
        running = asyncio.create_task(self.session.run())
        watchdog = asyncio.create_task(self._close_when_idle())
        self._post([{"type": "session.created", "session": self._description()}])
        try:
            async for raw in self.websocket:
                self._receive(raw)
        except ConnectionClosed:
            pass
        finally:
            self.session.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(running, 30)
            self.session.close()
            for task in (sender, watchdog):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if self._dropping is not None:
                await self._dropping

    def _description(self) -> dict:
        settings, models = self.session.settings, self.service.models
        return {
            "id": self.id,
            "model": settings.model,
            "voice": settings.voice,
            "steps": settings.steps or models.engine.sampler.steps,
            **self._audio_description(),
        }

    def _audio_description(self) -> dict:
        formats = self.formats
        return {
            "input_audio_format": formats.input.codec,
            "input_sample_rate": formats.input.rate,
            "output_audio_format": formats.output.codec,
            "output_sample_rate": formats.output.rate,
        }

    def _receive(self, raw: str | bytes) -> None:
        self._active_at = asyncio.get_running_loop().time()
        try:
            request = parse(raw)
        except ProtocolError as error:
            self._post([error_message(error.code, str(error), error.event_id)])
            return
        if isinstance(request, Append):
            try:
                samples = self.formats.decode(request.data)
            except ValueError as error:
                self._post([error_message("invalid_audio", str(error))])
                return
            if not self.microphone.push(samples):
                self._post([error_message(
                    "audio_overflow",
                    f"more than {self.service.config.max_buffered_s:g} s of audio waiting; "
                    "send it at about real time",
                )])  # fmt: skip
        elif isinstance(request, Commit):
            silence = self.session.longest_pause_ms + 200  # ms: the ear's longest wait, and some
            self.microphone.push(np.zeros(silence * SESSION_RATE // 1000, np.float32))
            self._post([{"type": "input_audio_buffer.committed"}])
        elif isinstance(request, Clear):
            self.microphone.clear()
            self.session.send(Mute())
            self.session.send(Unmute())
            self._post([{"type": "input_audio_buffer.cleared"}])
        elif isinstance(request, CreateResponse):
            return  # answers start by themselves; accepted so Realtime clients need no change
        elif isinstance(request, UpdateSession):
            self._update(request)
        else:
            self.session.send(request)

    def _update(self, request: UpdateSession) -> None:
        """Formats and the voice are the connection's; live settings go to the session,
        which answers them with its own ``session.updated``. All or nothing."""
        voice = self.session.settings.voice
        if request.voice not in (None, voice):
            self._post([error_message(
                "invalid_field",
                f"this server speaks with {voice}; start `quicksilver serve --voice "
                f"{request.voice}` for another voice",
            )])  # fmt: skip
            return
        audio = request.audio
        formats = self.formats
        try:
            new_input = chosen_format(
                audio.get("input_audio_format", formats.input.codec),
                audio.get("input_sample_rate"), formats.input, SESSION_RATE,
            )  # fmt: skip
            new_output = chosen_format(
                audio.get("output_audio_format", formats.output.codec),
                audio.get("output_sample_rate"), formats.output, formats.voice_rate,
            )  # fmt: skip
        except ValueError as error:
            self._post([error_message("invalid_field", str(error))])
            return
        if request.settings:
            self.session.send(UpdateSettings(request.settings))
        if audio or request.voice is not None:
            if new_input != formats.input:
                formats.set_input(new_input)
            formats.output = new_output
            described = {"voice": voice, **self._audio_description()}
            self._post([{"type": "session.updated", "session": described}])

    def _audio(self, samples: np.ndarray) -> None:
        self._post(self.translator.audio(self.formats.encode(samples)))

    def _post(self, messages: list[dict]) -> None:
        """Queue messages for the client without waiting; a full queue drops the client."""
        for message in messages:
            if self._dropping is not None:
                return
            try:
                self.outbox.put_nowait(message)
            except asyncio.QueueFull:
                log.warning("%s: the client reads too slowly; dropping it", self.id)
                reason = "send queue full: the client reads too slowly"
                self._dropping = asyncio.create_task(self.websocket.close(SLOW_READER, reason))

    async def _send(self) -> None:
        numbers = itertools.count(1)
        try:
            while True:
                message = await self.outbox.get()
                event = {"event_id": f"event_{next(numbers)}", **message}
                await self.websocket.send(json.dumps(event))
                self._active_at = asyncio.get_running_loop().time()
        except ConnectionClosed:
            pass

    async def _close_when_idle(self) -> None:
        """Close the connection once nothing has gone either way for ``idle_timeout_s``,
        so a client that went quiet (or vanished without closing) frees its session; a
        turn being answered is not idle: its drafts and audio count."""
        limit = self.service.config.idle_timeout_s
        loop = asyncio.get_running_loop()
        while (left := self._active_at + limit - loop.time()) > 0:
            await asyncio.sleep(left)
        log.info("%s: idle for %g s; closing it", self.id, limit)
        await self.websocket.close(IDLE, f"idle for {limit:g} s: nothing sent or received")
