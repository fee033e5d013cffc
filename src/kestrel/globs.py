"""Shell-style globs over `/`-separated paths, as regular expressions."""

from __future__ import annotations

import re


def glob_regex(glob: str) -> str:
    """A regex (for `fullmatch`) for a shell-style glob over `/`-separated paths.

    `*` and `?` stay within one folder, `**` crosses folders (`**/` also matches no folder),
    `[abc]`/`[!abc]` and `{a,b}` work as in a shell.
    """
    out: list[str] = []
    i = 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (end := glob.find("]", i + 2)) != -1:
            inner = glob[i + 1 : end]
            negate = inner[:1] in "!^" and bool(inner)
            escaped = re.escape(inner[1:] if negate else inner).replace("\\-", "-")
            out.append(f"[{'^' if negate else ''}{escaped}]")
            i = end
        elif char == "{" and (end := glob.find("}", i)) != -1:
            options = glob[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(option) for option in options) + ")")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)
