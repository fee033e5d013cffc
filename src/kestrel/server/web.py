"""The web panel: the static files shipped in `kestrel/web/static`, served at `/`.

The panel is plain HTML, ES modules and CSS that talk to the public `/v1` API with the token the
person pastes; nothing here reads a token or a session. Only the files present when the server
starts are served (a fixed table, so no request can name a path outside the folder), each with a
strict Content-Security-Policy: scripts, styles and connections from this origin only, no inline
script, and never inside a frame. None of these routes is part of the API's schema.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

STATIC = Path(__file__).resolve().parent.parent / "web" / "static"
"""The panel's files, inside the installed package."""

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}
"""Sent with every file of the panel."""

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def static_files(folder: Path = STATIC) -> dict[str, Path]:
    """The servable files under `folder` by their path relative to it (POSIX form): plain
    files of a known type only, links and anything else left out."""
    if not folder.is_dir():
        return {}
    return {
        path.relative_to(folder).as_posix(): path
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink() and path.suffix in MEDIA_TYPES
    }


def panel_router(folder: Path = STATIC) -> APIRouter:
    """Routes for the panel: `index.html` at `/`, every other file at `/assets/<path>`."""
    files = static_files(folder)
    router = APIRouter(include_in_schema=False)

    def send(name: str) -> Response:
        path = files.get(name)
        if path is None:
            raise StarletteHTTPException(404, f"no file {name} in the web panel")
        return Response(path.read_bytes(), media_type=MEDIA_TYPES[path.suffix], headers=HEADERS)

    @router.get("/")
    def index() -> Response:
        """The panel's page."""
        return send("index.html")

    @router.get("/assets/{name:path}")
    def asset(name: str) -> Response:
        """A script, a style sheet or an image of the panel."""
        return send(name)

    return router
