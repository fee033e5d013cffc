"""The forge's token: from the environment, else from the user's git credential helper.

The token is only ever handed to the forge's API and to git pushes to the forge's own host; it
never enters a sandbox, an event, a log or a message.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

TOKEN_VARIABLES = ("KESTREL_FORGE_TOKEN", "GITHUB_TOKEN", "GH_TOKEN")
GITLAB_TOKEN_VARIABLES = ("KESTREL_FORGE_TOKEN", "GITLAB_TOKEN")
_TIMEOUT_S = 15


def forge_token(
    host: str, env: Mapping[str, str] | None = None, *, kind: Literal["github", "gitlab"] = "github"
) -> str:
    """The token for `host`: the first of `TOKEN_VARIABLES` (`GITLAB_TOKEN_VARIABLES` for
    GitLab) set, else what `git credential fill` gives for https://HOST (the user's own helpers,
    never the repository's); '' if none."""
    source = os.environ if env is None else env
    for name in GITLAB_TOKEN_VARIABLES if kind == "gitlab" else TOKEN_VARIABLES:
        if source.get(name, "").strip():
            return source[name].strip()
    return _from_git(host, source)


def _from_git(host: str, env: Mapping[str, str]) -> str:
    if not host:
        return ""
    kept = {k: env[k] for k in ("PATH", "HOME", "XDG_CONFIG_HOME") if k in env}
    kept |= {
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
    }
    home = Path(env.get("HOME", "/"))
    try:
        done = subprocess.run(
            ["git", "-c", "credential.interactive=false", "credential", "fill"],
            input=f"protocol=https\nhost={host}\n\n",
            capture_output=True,
            text=True,
            env=kept,
            cwd=home if home.is_dir() else "/",
            timeout=_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if done.returncode != 0:
        return ""
    for line in done.stdout.splitlines():
        if line.startswith("password="):
            return line.removeprefix("password=")
    return ""
