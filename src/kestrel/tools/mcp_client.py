"""One connection to one MCP server: started on first use, restarted after a crash or a hang,
stopped with the session.

The connection lives in a task of its own, since the SDK's transports must be entered and left
in one task; calls from any task of the same event loop go through its `ClientSession`. A call
that outlives the server's timeout stops the server (it may be stuck), so the next call starts a
fresh one. Each crash, hang and restart is told in `notices`, which the tools turn into events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from kestrel.mcp_config import McpServerConfig

logger = logging.getLogger(__name__)

_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
"""What the SDK's streams raise when the other end is gone."""
START_TIMEOUT_S = 30.0
MAX_RESTARTS = 3
"""Restarts per session before a server that keeps failing is left stopped."""
Launcher = Callable[[McpServerConfig], tuple[Sequence[str], Mapping[str, str]]]
"""The command line and environment that start a stdio server: its own, or the sandbox's."""


class McpServerFailed(Exception):
    """The server could not be started or reached, crashed, or did not answer in time."""


@dataclass(frozen=True, slots=True)
class Listing:
    """What a server offers, as listed once connected."""

    tools: tuple[types.Tool, ...]
    resources: bool
    prompts: bool
    instructions: str | None = None


class McpServer:
    """The connection to the server `config` names; nothing starts until it is needed."""

    def __init__(
        self, config: McpServerConfig, *, launcher: Launcher | None = None, log_dir: Path
    ) -> None:
        self.config = config
        self._launcher = launcher
        self._log_dir = log_dir
        self._task: asyncio.Task[None] | None = None
        self._session: ClientSession | None = None
        self._stop = asyncio.Event()
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._starts = 0
        self._given_up = ""
        self.notices: list[str] = []
        """Crashes, hangs and restarts not yet reported, oldest first."""

    async def session(self) -> ClientSession:
        """The live session, starting (or restarting) the server if it is not running."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            if self._session is not None and self._alive(loop):
                return self._session
            if self._task is not None and self._task.get_loop() is loop and self._task.done():
                self._note_exit()
            if self._given_up:
                raise McpServerFailed(self._given_up)
            return await self._start()

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call `tool`; McpServerFailed when the server is down, crashes, or times out."""
        session = await self.session()
        timeout = self.config.timeout_s
        try:
            result = await asyncio.wait_for(
                session.call_tool(tool, arguments, read_timeout_seconds=timeout), timeout + 5
            )
        except TimeoutError:
            raise await self._hung(timeout) from None
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise await self._hung(timeout) from None
            if exc.code == types.CONNECTION_CLOSED or not self._alive(asyncio.get_running_loop()):
                await self._drop(f"exited during a call{self._last_words()}")
                raise McpServerFailed(self._crash_text(exc.error.message)) from None
            raise
        except (*_GONE, OSError) as exc:
            await self._drop(f"lost its connection ({type(exc).__name__})")
            raise McpServerFailed(self._crash_text(type(exc).__name__)) from None
        if not isinstance(result, types.CallToolResult):
            raise McpServerFailed(f"MCP server {self.config.name!r} sent no tool result")
        return result

    async def _hung(self, timeout: float) -> McpServerFailed:
        await self._drop(f"did not answer a call within {timeout:g} s and was stopped")
        return McpServerFailed(
            f"MCP server {self.config.name!r} did not answer within {timeout:g} s; it was "
            "stopped and starts again on the next call"
        )

    async def listing(self) -> Listing:
        """The tools (every page), and whether resources and prompts are offered."""
        session = await self.session()
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await asyncio.wait_for(session.list_tools(params=params), START_TIMEOUT_S)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor or len(tools) > 1000:
                break
        caps = session.server_capabilities
        return Listing(
            tools=tuple(tools),
            resources=bool(caps and caps.resources),
            prompts=bool(caps and caps.prompts),
        )

    async def catalogue(self) -> tuple[list[str], list[str]]:
        """The resources (`uri  name`) and prompts (`name  description`) the server offers."""
        session = await self.session()
        caps = session.server_capabilities
        resources: list[str] = []
        prompts: list[str] = []
        if caps and caps.resources:
            listed = await asyncio.wait_for(session.list_resources(), START_TIMEOUT_S)
            resources = [f"{r.uri}  {r.name}" for r in listed.resources]
        if caps and caps.prompts:
            named = await asyncio.wait_for(session.list_prompts(), START_TIMEOUT_S)
            prompts = [f"{p.name}  {(p.description or '').strip()}" for p in named.prompts]
        return resources, prompts

    async def close(self) -> None:
        """Stop the server, if it runs in this event loop."""
        await self._drop("")

    def _alive(self, loop: asyncio.AbstractEventLoop) -> bool:
        task = self._task
        return task is not None and task.get_loop() is loop and not task.done()

    async def _start(self) -> ClientSession:
        if self._starts > MAX_RESTARTS:
            self._given_up = (
                f"MCP server {self.config.name!r} failed {self._starts} times in this session "
                "and is not started again"
            )
            raise McpServerFailed(self._given_up)
        self._starts += 1
        if self._starts > 1:
            self.notices.append(f"MCP server {self.config.name!r} is being restarted")
        self._stop = asyncio.Event()
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp-{self.config.name}")
        try:
            self._session = await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        except TimeoutError:
            await self._drop("")
            raise McpServerFailed(
                f"MCP server {self.config.name!r} did not start within {START_TIMEOUT_S:g} s"
                + self._last_words()
            ) from None
        except Exception as exc:
            await self._drop("")
            raise McpServerFailed(
                f"MCP server {self.config.name!r} could not be started: {_plain(exc)}"
                + self._last_words()
            ) from None
        return self._session

    async def _own(self, ready: asyncio.Future[ClientSession]) -> None:
        try:
            with self._errlog() as errlog:
                async with (
                    self._streams(errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    ready.set_result(session)
                    await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(
                    exc if isinstance(exc, Exception) else McpServerFailed("stopped")
                )
            if not isinstance(exc, Exception):
                raise
            logger.debug("MCP server %s ended", self.config.name, exc_info=True)

    @asynccontextmanager
    async def _streams(self, errlog: TextIO) -> AsyncIterator[tuple[Any, Any]]:
        config = self.config
        if config.transport == "stdio":
            if self._launcher is None:
                argv: Sequence[str] = [config.command, *config.args]
                env, cwd = config.env, config.cwd
            else:
                (argv, env), cwd = self._launcher(config), None
            params = StdioServerParameters(
                command=argv[0], args=list(argv[1:]), env=dict(env), cwd=cwd
            )
            async with stdio_client(params, errlog=errlog) as streams:
                yield streams[0], streams[1]
        elif config.transport == "sse":
            async with sse_client(config.url, headers=dict(config.headers)) as streams:
                yield streams[0], streams[1]
        else:
            client = create_mcp_http_client(headers=dict(config.headers))
            async with client, streamable_http_client(config.url, http_client=client) as streams:
                yield streams[0], streams[1]

    @contextlib.contextmanager
    def _errlog(self) -> Any:
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with self._log_path().open("a", encoding="utf-8", errors="replace") as log:
            yield log

    def _log_path(self) -> Path:
        return self._log_dir / f"mcp-{self.config.name}.stderr.log"

    def _last_words(self) -> str:
        """The end of what the server wrote to stderr, as a clause."""
        try:
            text = self._log_path().read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line for line in text.strip().splitlines() if line.strip()]
        return f" (its last words: {lines[-1][:300]!r})" if lines else ""

    def _crash_text(self, detail: str) -> str:
        return (
            f"MCP server {self.config.name!r} stopped during the call ({detail})"
            f"{self._last_words()}; it starts again on the next call"
        )

    def _note_exit(self) -> None:
        self.notices.append(
            f"MCP server {self.config.name!r} exited unexpectedly{self._last_words()}"
        )
        self._session = None

    async def _drop(self, why: str) -> None:
        task, self._task, self._session = self._task, None, None
        if why:
            self.notices.append(f"MCP server {self.config.name!r} {why}")
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            return
        self._stop.set()
        try:
            await asyncio.wait_for(task, 10)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except Exception:  # noqa: S110 - the owner task logs its own end
            pass


def _plain(exc: BaseException) -> str:
    """A failure in words; the SDK wraps the cause of a failed start in exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
