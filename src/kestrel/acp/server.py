"""`kestrel acp`: serve the Agent Client Protocol on standard input and output until the
editor closes the connection."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import IO, cast

from acp.agent.connection import AgentSideConnection
from acp.interfaces import Agent

from kestrel.acp.agent import AcpOptions, KestrelAgent
from kestrel.acp.channel import claim_stdout, open_channel

logger = logging.getLogger("kestrel.acp")


def serve(options: AcpOptions) -> None:
    """Speak ACP on stdio; logs go to standard error."""
    out = claim_stdout()
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="kestrel acp: %(levelname)s %(message)s"
    )
    logger.info("speaking the Agent Client Protocol on stdin and stdout")
    try:
        asyncio.run(_serve(options, out))
    except KeyboardInterrupt:
        logger.info("interrupted")


async def _serve(options: AcpOptions, out: IO[bytes]) -> None:
    channel = await open_channel(out)
    agent = KestrelAgent(options)
    # The SDK answers "method not found" for the methods Kestrel does not implement.
    connection = AgentSideConnection(cast(Agent, agent), channel, listening=False)
    try:
        await connection.listen()
    finally:
        await agent.stop_runs()
        agent.close()
        await asyncio.shield(connection.close())
    logger.info("the editor closed the connection")
