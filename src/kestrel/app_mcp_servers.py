"""The MCP servers of a session: how each is started (in the sandbox unless its entry says
otherwise), and what tools each offers.

What a server offers is asked once and kept for a day under the data directory, keyed by the
server's set-up, so a session starts without waiting for servers it may never call: a server is
started when the model first calls one of its tools. A server that cannot be listed is left out,
and the session says why in an event.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import time
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types

from kestrel.app_sandbox import executor_for
from kestrel.app_store import data_dir
from kestrel.mcp_config import McpServerConfig
from kestrel.sandbox.base import Executor
from kestrel.sandbox.bwrap import BwrapExecutor
from kestrel.sandbox.server_process import server_command
from kestrel.settings import Settings
from kestrel.tools.base import Tool
from kestrel.tools.mcp_client import Launcher, Listing, McpServer, McpServerFailed
from kestrel.tools.mcp_resources import ListMcpResources, ReadMcpResource
from kestrel.tools.mcp_tool import mcp_tool

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

CACHE_FOR_S = 24 * 3600
LIST_TIMEOUT_S = 45.0


def open_servers(
    settings: Settings,
    cwd: Path,
    executor: Executor,
    session_id: str,
    configs: Sequence[McpServerConfig],
) -> tuple[tuple[McpServer, ...], tuple[Tool, ...], tuple[str, ...]]:
    """The servers of `configs` (nothing started), their tools, and the problems on the way."""
    problems: list[str] = []
    folder = data_dir(settings) / "mcp"
    log_dir = data_dir(settings) / "artifacts" / session_id
    servers = []
    for config in configs:
        launcher = sandbox_launcher(executor, cwd, folder / "seccomp") if config.sandbox else None
        cwd_config = replace(config, cwd=config.cwd or str(cwd))
        servers.append(McpServer(cwd_config, launcher=launcher, log_dir=log_dir))
    listings = list_all(servers, folder / "tools")
    tools: list[Tool] = []
    with_resources: dict[str, McpServer] = {}
    for server, listing in zip(servers, listings, strict=True):
        if isinstance(listing, str):
            problems.append(f"{listing}; its tools are not offered in this session")
            continue
        seen = {t.name for t in tools}
        tools += [t for t in (mcp_tool(server, x) for x in listing.tools) if t.name not in seen]
        if listing.resources:
            with_resources[server.config.name] = server
    if with_resources:
        tools += [ListMcpResources(with_resources), ReadMcpResource(with_resources)]
    return tuple(servers), tuple(tools), tuple(problems)


def sandbox_launcher(executor: Executor, root: Path, filter_dir: Path) -> Launcher | None:
    """How a stdio server starts in `executor`'s sandbox; None where commands run unconfined."""
    if not isinstance(executor, BwrapExecutor):
        return None

    def launch(config: McpServerConfig) -> tuple[Sequence[str], Mapping[str, str]]:
        argv = server_command(
            executor,
            [config.command, *config.args],
            cwd=Path(config.cwd or root),
            share_network=config.network == "host",
            filter_dir=filter_dir,
        )
        return argv, executor.environment(config.env)

    return launch


def list_all(servers: Sequence[McpServer], cache: Path) -> list[Listing | str]:
    """Each server's listing (from the cache when fresh) or why there is none."""
    found: list[Listing | str | None] = [_cached(cache, s.config) for s in servers]
    missing = [i for i, listing in enumerate(found) if listing is None]
    if missing:
        fresh = _in_thread([servers[i] for i in missing])
        for i, listing in zip(missing, fresh, strict=True):
            found[i] = listing
            if isinstance(listing, Listing):
                _store(cache, servers[i].config, listing)
    return [listing for listing in found if listing is not None]


async def probe(server: McpServer) -> Listing | str:
    """Start a copy of `server`, list what it offers, stop it; the reason when that fails."""
    copy = McpServer(server.config, launcher=server._launcher, log_dir=server._log_dir)
    try:
        return await asyncio.wait_for(copy.listing(), LIST_TIMEOUT_S)
    except McpServerFailed as exc:
        return str(exc)
    except TimeoutError:
        return (
            f"MCP server {server.config.name!r} did not list its tools within {LIST_TIMEOUT_S:g} s"
        )
    except Exception as exc:
        return f"MCP server {server.config.name!r} could not list its tools: {exc}"
    finally:
        await copy.close()


def _in_thread(servers: Sequence[McpServer]) -> list[Listing | str]:
    """Probe `servers` together, on an event loop of their own (callers may be in one)."""

    async def every() -> list[Listing | str]:
        return list(await asyncio.gather(*(probe(s) for s in servers)))

    return _on_own_loop(every())


def _on_own_loop(work: Coroutine[Any, Any, _T]) -> _T:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, work).result()


def _cache_file(cache: Path, config: McpServerConfig) -> Path:
    key = hashlib.sha256(config.fingerprint().encode()).hexdigest()[:16]
    return cache / f"{config.name}-{key}.json"


def _cached(cache: Path, config: McpServerConfig) -> Listing | None:
    path = _cache_file(cache, config)
    try:
        if time.time() - path.stat().st_mtime > CACHE_FOR_S:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        tools = tuple(types.Tool.model_validate(t) for t in data["tools"])
        return Listing(
            tools=tools, resources=bool(data["resources"]), prompts=bool(data["prompts"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _store(cache: Path, config: McpServerConfig, listing: Listing) -> None:
    data = {
        "tools": [
            t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listing.tools
        ],
        "resources": listing.resources,
        "prompts": listing.prompts,
    }
    path = _cache_file(cache, config)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(data), encoding="utf-8")
        temporary.replace(path)
    except OSError as exc:  # a full disk costs only the next start's listing
        logger.debug("could not keep the tool list of %s: %s", config.name, exc)


def forget_listing(settings: Settings, config: McpServerConfig) -> None:
    """Drop the kept tool list of `config`, so the next session lists it afresh."""
    _cache_file(data_dir(settings) / "mcp" / "tools", config).unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class ServerCheck:
    """What `kestrel mcp test` found: the listing, or why there is none."""

    config: McpServerConfig
    listing: Listing | None
    problem: str = ""
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    seconds: float = 0.0


def check_server(settings: Settings, cwd: Path, config: McpServerConfig) -> ServerCheck:
    """Start `config`'s server as a session would, list everything it offers, stop it; the
    fresh tool list replaces the one kept for sessions."""
    executor = executor_for(settings, cwd)
    folder = data_dir(settings) / "mcp"
    launcher = sandbox_launcher(executor, cwd, folder / "seccomp") if config.sandbox else None
    config = replace(config, cwd=config.cwd or str(cwd))
    server = McpServer(config, launcher=launcher, log_dir=folder / "logs")

    async def look() -> ServerCheck:
        started = time.monotonic()
        try:
            listing = await asyncio.wait_for(server.listing(), LIST_TIMEOUT_S)
            resources, prompts = await asyncio.wait_for(server.catalogue(), LIST_TIMEOUT_S)
        except McpServerFailed as exc:
            return ServerCheck(config, None, str(exc))
        except TimeoutError:
            return ServerCheck(config, None, f"no answer within {LIST_TIMEOUT_S:g} s")
        except Exception as exc:
            return ServerCheck(config, None, f"{type(exc).__name__}: {exc}")
        finally:
            await server.close()
        spent = time.monotonic() - started
        return ServerCheck(config, listing, "", tuple(resources), tuple(prompts), spent)

    checked = _on_own_loop(look())
    if checked.listing is not None:
        _store(folder / "tools", config, checked.listing)
    return checked
