"""The browser page: a few static files, handed out on the service's own port.

A plain HTTP GET (no websocket upgrade) for one of :data:`FILES` gets that file; any
other path gets 404. The page holds no secret, so it is served without the token; the
websocket it opens still needs one. Its Content-Security-Policy lets it load and
connect only to this server, so it needs no build step, no CDN and no network.
"""

from __future__ import annotations

import email.utils
from functools import cache
from http import HTTPStatus
from importlib import resources
from urllib.parse import urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/capture.js": ("capture.js", "text/javascript; charset=utf-8"),
    "/style.css": ("style.css", "text/css; charset=utf-8"),
}
POLICY = (
    "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def wants_websocket(request: Request) -> bool:
    return "websocket" in request.headers.get("Upgrade", "").lower()


def page_response(request: Request) -> Response:
    """The static file ``request`` asks for, or 404."""
    path = urlsplit(request.path).path
    if path not in FILES:
        known = ", ".join(FILES)
        return _response(HTTPStatus.NOT_FOUND, f"no page at {path}; try {known}\n".encode(),
                         "text/plain; charset=utf-8")  # fmt: skip
    name, content_type = FILES[path]
    return _response(HTTPStatus.OK, _read(name), content_type)


@cache
def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


def _response(status: HTTPStatus, body: bytes, content_type: str) -> Response:
    headers = Headers(
        [
            ("Date", email.utils.formatdate(usegmt=True)),
            ("Connection", "close"),
            ("Content-Length", str(len(body))),
            ("Content-Type", content_type),
            ("Cache-Control", "no-cache"),
            ("Content-Security-Policy", POLICY),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
        ]
    )
    return Response(status.value, status.phrase, headers, body)
