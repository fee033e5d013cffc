"""Configuration keys that make git run a program, and the values that switch them off.

Keys with a fixed name are overridden on every call (command-line scope beats the repository's
files). Keys named per driver (`filter.<name>.process`, `diff.<name>.textconv`, ...) cannot be
overridden without knowing every name, so a repository whose own configuration sets one, or
pulls in another file with `include.path`/`includeIf`, is refused instead.
"""

from __future__ import annotations

import re

# Command-line scope: neither the repository's config nor the user's can change these.
NEUTRAL_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("diff.ignoreSubmodules", "dirty"),
    ("status.submoduleSummary", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
)
"""Pairs passed to every host-side git call; `diff.ignoreSubmodules=dirty` keeps git from
starting a second git inside each submodule's work tree."""

FILE_PROTOCOL: tuple[tuple[str, str], ...] = (("protocol.file.allow", "always"),)
"""Added for calls that fetch from a local path, and only those."""

_REFUSED = re.compile(
    r"""(
        include\.path
      | includeif\..*\.path
      | filter\..*\.(clean|smudge|process)
      | diff\..*\.(command|textconv)
      | diff\.external
      | merge\..*\.driver
      | remote\..*\.(uploadpack|receivepack|vcs)
      | credential\..*helper
      | gpg\.(.*\.)?program
      | core\.(alternaterefscommand|askpass|sshcommand|gitproxy)
      | uploadpack\.packobjectshook
    )""",
    re.VERBOSE,
)


def refused_keys(listing: str) -> list[str]:
    """Keys of a `git config --show-scope --list -z` listing that Kestrel will not run with.

    Only the repository's own scopes count (`local`, `worktree`); the user's global file and
    Kestrel's own command-line overrides are trusted.
    """
    found: list[str] = []
    fields = listing.split("\0")
    for scope, entry in zip(fields[0::2], fields[1::2], strict=False):
        if scope not in ("local", "worktree"):
            continue
        key, _, value = entry.partition("\n")
        if _REFUSED.fullmatch(key.lower()) or _runs_update(key.lower(), value):
            found.append(key)
    return found


def _runs_update(key: str, value: str) -> bool:
    """`submodule.<name>.update = !command` runs the command on `git submodule update`."""
    return key.startswith("submodule.") and key.endswith(".update") and value.startswith("!")
