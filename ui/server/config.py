"""How the websocket service listens and what it allows, with the defaults written once:
the ``serve`` command's flags read them here without importing the service (or torch)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class ServerConfig:
    """Where the service listens and what it allows."""

    host: str = "127.0.0.1"
    port: int = 8765  # 0: any free port (the tests)
    token: str | None = None  # required of clients when set
    allow_origins: tuple[str, ...] = ()  # browser origins besides the server's own
    max_message_bytes: int = 1 << 20  # larger messages close the connection (1009)
    send_queue: int = 1024  # messages waiting for a client; beyond: it is dropped
    max_buffered_s: float = 60.0  # pushed audio not yet heard; beyond: refused
    max_clients: int = 16  # beyond: the handshake gets HTTP 503
    max_batch: int = 8  # turns denoised together; more wait their turn, first come first served
    idle_timeout_s: float = 300.0  # nothing sent either way this long: the connection closes
    log: bool = True  # each connection's turns in a transcript log of its own
    log_dir: Path | None = None  # None: "connections/" beside the settings' log
    certfile: Path | None = None  # with keyfile: serve https and wss (phones' microphones)
    keyfile: Path | None = None

    @property
    def tls(self) -> bool:
        return self.certfile is not None

    def check(self) -> None:
        """Refuse a configuration that exposes the assistant without a token, or names
        half a certificate or a missing one."""
        if (self.certfile is None) != (self.keyfile is None):
            raise ValueError("--certfile and --keyfile go together: a certificate and its key")
        for path in (self.certfile, self.keyfile):
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{path} is not a file (--certfile / --keyfile)")
        if self.max_batch < 1:
            raise ValueError(f"--max-batch must be at least 1, got {self.max_batch}")
        if self.host not in LOOPBACK and not self.token:
            raise ValueError(f"binding {self.host} needs --token: anyone could reach it")
