"""``quicksilver serve`` and ``quicksilver client``: the websocket face on the command line.

Arguments are checked before anything loads; websockets and the models are imported
inside the commands so that ``quicksilver --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from quicksilver.assistant.config import Settings
from quicksilver.ui.flags import add_setting_flags
from quicksilver.ui.server.config import ServerConfig


def cmd_serve(args: argparse.Namespace, settings: Settings) -> int:
    """Load the models once, then serve websocket clients until Ctrl-C."""
    from quicksilver.assistant.loading import (
        StartupError,
        load_engine,
        load_transcriber_for,
        load_turn_model,
        load_voice,
    )
    from quicksilver.ui.server.service import Models, Service

    config = ServerConfig(
        host=args.host,
        port=args.port,
        token=args.token,
        allow_origins=tuple(args.allow_origin),
        max_clients=args.max_clients,
        max_batch=args.max_batch,
        idle_timeout_s=args.idle_timeout,
        log=args.log,
        log_dir=args.log_dir,
        certfile=args.certfile,
        keyfile=args.keyfile,
    )
    config.check()
    try:
        print("loading the models…", file=sys.stderr)
        models = Models(
            load_engine(settings.model, settings.device, settings.threads),
            load_transcriber_for(settings),
            load_voice(settings.voice, settings.threads),
            load_turn_model(settings.threads) if settings.semantic_turns else None,
        )
    except StartupError as error:
        print(f"quicksilver serve: {error}", file=sys.stderr)
        return 1

    async def serve() -> None:
        async with Service(settings, config, models) as service:
            print(f"listening on {service.url} (Ctrl-C stops)", file=sys.stderr)
            await service.serve_forever()

    asyncio.run(serve())
    return 0


def cmd_client(args: argparse.Namespace, settings: Settings) -> int:
    """Ask one question of a running server; print its events, write its audio."""
    from quicksilver.audio.wavfile import check_output_path, read_wav, write_wav
    from quicksilver.ui.server.client import ask, describe

    if (args.question is None) == (args.wav is None):
        raise ValueError("give a QUESTION or --wav Q.wav, not both")
    if args.output:
        check_output_path(args.output)
    samples = read_wav(args.wav) if args.wav else None
    try:
        reply = asyncio.run(
            ask(
                args.url,
                text=args.question,
                samples=samples,
                token=args.token,
                timeout=args.timeout,
                on_event=lambda event: print(describe(event), flush=True),
            )
        )
    except (OSError, TimeoutError) as error:
        print(f"quicksilver client: {args.url}: {error or 'no answer in time'}", file=sys.stderr)
        return 1
    if args.output:
        write_wav(args.output, reply.samples, reply.sample_rate)
        print(f"wrote the answer audio to {args.output}", file=sys.stderr)
    return 0 if reply.done is not None else 1


def add_server_commands(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="the realtime websocket service (protocol: docs/protocol.md)",
        description="Serve conversations over websockets: the models load once and every "
        "connection gets its own session. Binds 127.0.0.1 unless told otherwise; binding "
        "another address needs --token.",
    )
    defaults = ServerConfig()
    serve.add_argument(
        "--host", default=defaults.host, help=f"address to bind (default {defaults.host})"
    )
    serve.add_argument("--port", type=int, default=defaults.port, help=f"port ({defaults.port})")
    serve.add_argument("--token", help="clients must send it: Authorization: Bearer T or ?token=T")
    serve.add_argument(
        "--allow-origin", action="append", default=[], metavar="URL",
        help="a browser origin allowed besides the server's own (repeatable)",
    )  # fmt: skip
    serve.add_argument(
        "--max-clients", type=int, default=defaults.max_clients, metavar="N",
        help=f"connections at once; more get HTTP 503 (default {defaults.max_clients})",
    )  # fmt: skip
    serve.add_argument(
        "--max-batch", type=int, default=defaults.max_batch, metavar="N",
        help="turns denoised together in one batch; more wait their turn, first come "
        f"first served (default {defaults.max_batch}; 1: one at a time)",
    )  # fmt: skip
    serve.add_argument(
        "--idle-timeout", type=float, default=defaults.idle_timeout_s, metavar="S",
        help="seconds with nothing sent either way before a connection is closed "
        f"(default {defaults.idle_timeout_s:g})",
    )  # fmt: skip
    serve.add_argument(
        "--certfile", type=Path, metavar="PEM",
        help="serve https and wss with this certificate (with --keyfile): browsers give "
        "the microphone to pages from other machines (phones) only over https",
    )  # fmt: skip
    serve.add_argument("--keyfile", type=Path, metavar="PEM", help="the certificate's key")
    serve.add_argument(
        "--no-log", dest="log", action="store_false",
        help="keep no transcript of the connections' turns (default: one file each)",
    )  # fmt: skip
    serve.add_argument(
        "--log-dir", type=Path, metavar="DIR",
        help="where each connection's transcript goes (default: connections/ beside the "
        "history log, see `quicksilver config`)",
    )  # fmt: skip
    add_setting_flags(
        serve,
        ("model", "steps", "device", "whisper_model", "voice", "hangover_ms", "speculative_ms",
         "semantic_turns", "voice_ahead", "max_pause_ms", "threads", "instructions", "unsure_below",
         "question_model"),
    )  # fmt: skip
    serve.set_defaults(func=cmd_serve)

    client = sub.add_parser(
        "client",
        help="ask a running `quicksilver serve` one question and print its events",
        description="The reference client: sends a typed QUESTION or a WAV file (streamed "
        "as 20 ms PCM16 chunks), prints every event as one line and writes the answer audio.",
    )
    client.add_argument("question", nargs="?", help="a typed question")
    client.add_argument("--wav", help="a spoken question, a WAV file")
    client.add_argument("--url", default="ws://127.0.0.1:8765", help="the server")
    client.add_argument("--token", help="the server's --token")
    client.add_argument("--output", help="write the answer audio to this WAV file")
    client.add_argument("--timeout", type=float, default=120.0, help="seconds (default 120)")
    client.set_defaults(func=cmd_client)
