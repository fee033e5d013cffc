"""A small git repository, an isolated home, and a real `kestrel mcp serve` to talk to."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp_types import CallToolResult, TextContent

# The SDK's client; the import sorter files it apart because this folder is named like it.
from mcp import ClientSession, StdioServerParameters, stdio_client

CALC = "def add(a, b):\n    return a - b\n\n\ndef double(x):\n    return add(x, x)\n"
SHIPPING = (
    '"""Shipping costs."""\n\n\n'
    "def compute_shipping_fee(weight_kg, distance_km):\n"
    '    """The fee for a parcel: a base price, then per kilogram and per kilometre."""\n'
    "    base = 4.5\n"
    "    return base + 0.8 * weight_kg + 0.01 * distance_km\n"
)
FIX_SCRIPT = [
    {
        "text": "Fixing add.",
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {"path": "calc.py", "old_str": "a - b", "new_str": "a + b"},
            }
        ],
    },
    {"text": "Fixed: add now adds."},
]


class Repo:
    """A committed git repository in `tmp/repo`, with HOME, caches and data kept in `tmp`."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "repo"
        self.root.mkdir()
        (self.root / "calc.py").write_text(CALC)
        (self.root / "shipping.py").write_text(SHIPPING)
        (self.root / "README.md").write_text("# Shop\n\nCarts, prices and shipping.\n")
        git = ["git", "-C", str(self.root)]
        subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run(
            [*git, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "start"],
            check=True,
        )
        self.script = tmp / "script.json"
        self.script.write_text(json.dumps(FIX_SCRIPT))
        self.stderr = tmp / "server-stderr.txt"
        home = tmp / "home"
        home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        self.env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            XDG_CACHE_HOME=str(home / ".cache"),
            KESTREL_DATA_DIR=str(tmp / "data"),
            # Sessions run in the sandbox where bubblewrap is installed (CI always); elsewhere
            # unconfined, as `--sandbox none` would.
            KESTREL_SANDBOX="bwrap" if shutil.which("bwrap") else "none",
            PYTHONUNBUFFERED="1",
        )

    def server_command(self, *options: str) -> list[str]:
        """The command line that starts the server, as an MCP client's configuration names it."""
        return [sys.executable, "-m", "kestrel", "mcp", "serve", *options]

    @asynccontextmanager
    async def connected(self, *options: str) -> AsyncIterator[ClientSession]:
        """An initialized MCP client session with a fresh server process, over its stdio."""
        command, *args = self.server_command(*options)
        params = StdioServerParameters(command=command, args=args, env=self.env, cwd=self.root)
        with self.stderr.open("a") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                yield session


def text_of(result: CallToolResult) -> str:
    """The text a tool call answered with (one text block)."""
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text
