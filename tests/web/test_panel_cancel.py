"""Cancel and resume from the panel, and a reload while the model is answering: the page picks
the log up where it is, with nothing lost and nothing twice. The first cancel comes while the
server's worker is still starting the run, which once lost it."""

from __future__ import annotations

from typing import Any

from panel_kit import Console, new_page, sign_in
from playwright.sync_api import expect
from server_kit import Server, wait_for
from test_panel import _renders_the_log_once, _start_from_the_form

SLOW = [{"text": "Let me think about this for a while. " * 20, "delay_s": 60}, {"text": "Done."}]


def _count(client: Any, sid: str, kind: str) -> int:
    return sum(r["event"]["type"] == kind for r in client.get(f"/sessions/{sid}/events").json())


def test_a_running_session_is_cancelled_then_resumed_and_a_reload_loses_nothing(
    server: Server, browser: Any
) -> None:
    token = server.token("cancels")
    client = server.client(token)
    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    sid = _start_from_the_form(page, server, "slow", SLOW)
    wait_for(client, sid, lambda v: v["status"] == "running")
    page.reload()  # While the model's reply is on its way.
    _renders_the_log_once(page, client, sid)
    page.get_by_role("button", name="Cancel").click()
    shown = wait_for(client, sid, lambda v: v["status"] == "idle")
    kinds = [r["event"]["type"] for r in client.get(f"/sessions/{sid}/events").json()]
    assert shown["finished"] == "cancelled", kinds
    expect(page.get_by_role("button", name="Resume")).to_be_visible(timeout=60_000)
    _renders_the_log_once(page, client, sid)
    resumed_before = kinds.count("session_resumed")
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_role("button", name="Cancel")).to_be_visible(timeout=60_000)
    wait_for(client, sid, lambda v: _count(client, sid, "session_resumed") > resumed_before)
    page.get_by_role("button", name="Cancel").click()
    again = wait_for(client, sid, lambda v: v["status"] == "idle")
    assert again["finished"] == "cancelled"
    _renders_the_log_once(page, client, sid)
    assert console.unexpected() == []
    page.context.close()
