"""Path and host patterns of `Read`, `Edit` and `WebFetch` rules."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from kestrel.globs import glob_regex

__all__ = ["domain_matches", "path_matches"]


def path_matches(pattern: str, raw: str, root: Path, home: Path) -> bool:
    """Whether a path pattern covers `raw` (as a tool was given it), lexically or resolved."""
    candidates = _path_forms(raw, root)
    regex, absolute = _path_regex(pattern, home)
    for path in candidates:
        if absolute:
            if regex.match(path.as_posix()):
                return True
            continue
        try:
            rel = path.relative_to(root).as_posix()
        except ValueError:
            continue
        if regex.match("" if rel == "." else rel):
            return True
    return False


def _path_forms(raw: str, root: Path) -> list[Path]:
    """The lexical absolute path, and the one with symlinks resolved when it differs."""
    expanded = Path(os.path.expanduser(raw))
    lexical = Path(os.path.normpath(root / expanded))
    forms = [lexical]
    try:
        real = lexical.resolve()
    except (OSError, ValueError):  # a loop, or a NUL in the name
        return forms
    if real != lexical:
        forms.append(real)
    return forms


def _path_regex(pattern: str, home: Path) -> tuple[re.Pattern[str], bool]:
    """A regex for `pattern` and whether it is about absolute paths."""
    absolute = False
    if pattern.startswith("//"):
        pattern, absolute = pattern[1:], True
    elif pattern == "~" or pattern.startswith("~/"):
        pattern, absolute = home.as_posix() + pattern[1:], True
    elif pattern.startswith("/"):
        pattern = pattern[1:]
    elif pattern.startswith("./"):
        pattern = pattern[2:]
    anywhere = not absolute and "/" not in pattern.rstrip("/")
    # A pattern naming a folder covers everything inside it, so `dir/**` is `dir`.
    pattern = pattern.rstrip("/").removesuffix("/**").rstrip("/") or ("/" if absolute else "")
    body = glob_regex(pattern)
    if anywhere:
        body = "(?:.*/)?" + body
    # A pattern naming a folder covers everything inside it.
    return re.compile(body + r"(?:/.*)?\Z", re.DOTALL), absolute


def domain_matches(spec: str, url: str) -> bool:
    """Whether a `domain:HOST` specifier covers the host of `url` (subdomains included)."""
    domain = spec.removeprefix("domain:").lower().strip(".")
    host = (urlsplit(url if "://" in url else "//" + url).hostname or "").lower()
    if domain.startswith("*."):
        return host.endswith(domain[1:])
    return host == domain or host.endswith("." + domain)
