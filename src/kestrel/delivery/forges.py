"""Which forge a delivery talks to, from its API's URL, and the forge settings of a server.

`https://api.github.com` and GitHub Enterprise's `https://HOST/api/v3` are GitHub; an API whose
path ends in `/api/v4` is GitLab's. The hosted server reads its forge from its own environment
when it starts (`forge_settings`): the token stays in the server's process, which runs the
pushes and the API calls; a session's process never gets it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from kestrel.delivery.credentials import forge_token
from kestrel.delivery.forge import GITHUB_API, Forge, GitHub
from kestrel.protocol.errors import ConfigError

ForgeKind = Literal["github", "gitlab"]
API_VARIABLE = "KESTREL_FORGE_API"
SYNC_VARIABLE = "KESTREL_FORGE_SYNC_S"
DEFAULT_SYNC_S = 300.0


def forge_kind(api_url: str) -> ForgeKind:
    """`gitlab` for an API at `.../api/v4`, else `github`."""
    path = urlsplit(api_url).path.rstrip("/")
    return "gitlab" if path.endswith("/api/v4") else "github"


def forge_host(api_url: str) -> str:
    """The host git pushes go to for the forge at `api_url` (api.github.com: github.com)."""
    host = urlsplit(api_url).hostname or ""
    return "github.com" if host == "api.github.com" else host


def make_forge(api_url: str, token: str, repository: str) -> Forge:
    """The client of the forge at `api_url` for `owner/name` (a GitLab project's path)."""
    if forge_kind(api_url) == "gitlab":
        from kestrel.delivery.gitlab import GitLab

        return GitLab(api_url, token, repository)
    return GitHub(api_url, token, repository)


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgeSettings:
    """The forge a hosted server delivers to, with its token, and how often it syncs reviews."""

    api_url: str = GITHUB_API
    token: str = field(default="", repr=False)
    sync_every_s: float = DEFAULT_SYNC_S
    """Seconds between two looks at each open pull request's review; 0: only when asked."""

    @property
    def host(self) -> str:
        """The host pushes go to with the token."""
        return forge_host(self.api_url)


def forge_settings(env: Mapping[str, str]) -> ForgeSettings:
    """The forge from `KESTREL_FORGE_API`, the token as `kestrel pr` finds it, and the sync
    interval from `KESTREL_FORGE_SYNC_S`; ConfigError for an interval that is not a number."""
    api_url = env.get(API_VARIABLE, "").strip() or GITHUB_API
    raw = env.get(SYNC_VARIABLE, "").strip()
    try:
        every = float(raw) if raw else DEFAULT_SYNC_S
    except ValueError:
        every = math.nan
    if not math.isfinite(every) or every < 0:
        raise ConfigError(f"{SYNC_VARIABLE} must be a number of seconds (0: no automatic sync)")
    token = forge_token(forge_host(api_url), env, kind=forge_kind(api_url))
    return ForgeSettings(api_url=api_url, token=token, sync_every_s=every)
