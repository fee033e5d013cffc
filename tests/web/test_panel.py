"""The web panel in a real headless Chromium against a real `kestrel serve` on loopback.

A task started from the panel's form is watched live, its command approved, its change reviewed,
downloaded and applied; a reload and a dropped connection re-render the log with nothing lost
and nothing twice; another tenant sees nothing; a refused token never gets past sign-in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from panel_kit import PHONE, Console, new_page, shots_folder, sign_in
from playwright.sync_api import expect
from server_kit import BASH_THEN_DONE, Server, wait_for

REFUSED = "status of 401"
NOT_FOUND = "status of 404"
HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
DROPPED = ("ERR_INCOMPLETE_CHUNKED_ENCODING", "ERR_CONNECTION_REFUSED", "ERR_EMPTY_RESPONSE")


def test_the_panel_is_served_with_a_strict_policy_beside_the_api(server: Server) -> None:
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    for part in ("default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"):
        assert part in policy
    assert "unsafe-inline" not in policy and "<script>" not in page.text
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    script = httpx.get(server.url + "/assets/js/app.js")
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["content-security-policy"] == policy
    for missing in ("/assets/nothing.js", "/assets/../../server/app.py", "/assets/%2e%2e/x"):
        assert httpx.get(server.url + missing).status_code == 404, missing
    assert httpx.get(server.url + "/v1/sessions").status_code == 401  # The API is unchanged.
    paths = httpx.get(server.url + "/openapi.json").json()["paths"]
    assert all(p.startswith("/v1/") for p in paths)


def test_a_refused_token_stays_on_sign_in_and_a_401_signs_out(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    console = Console()
    page = new_page(browser, console)
    page.goto(server.url + "/")
    page.keyboard.type("ks_not-a-token")  # The token field has the focus; Enter sends it.
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_have_text("The server refused this token.")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    page.screenshot(path=str(shots_folder(tmp_path) / "panel-sign-in.png"), full_page=True)

    token = server.token("signs-out")
    sign_in(page, server.url, token)
    assert token not in page.url
    page.evaluate("sessionStorage.setItem('kestrel.token', 'ks_revoked')")  # As if revoked.
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible(timeout=10_000)
    expect(page.locator("#sign-in-error")).to_contain_text("refused your token")
    sign_in(page, server.url, token)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    assert console.unexpected(REFUSED) == []
    page.context.close()


def test_a_task_from_the_form_is_approved_reviewed_and_applied(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    shots = shots_folder(tmp_path)
    token = server.token("panel")
    client = server.client(token)
    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    expect(page.get_by_text("No sessions yet")).to_be_visible()
    turns = [*BASH_THEN_DONE, {"text": "Glad to help."}]  # The last answers a follow-up.
    sid = _start_from_the_form(page, server, "from-form", turns)
    expect(page.get_by_role("heading", name="Waiting for your approval")).to_be_visible()
    expect(page.get_by_role("region", name="Waiting for your approval")).to_contain_text("echo hi")
    page.screenshot(path=str(shots / "panel-approval.png"), full_page=True)

    page.get_by_role("link", name="All sessions").click()
    row = page.locator(f'li[data-id="{sid}"]')
    expect(row.locator(".badge.waiting")).to_have_text("Waiting for you: approve a command")
    page.screenshot(path=str(shots / "panel-list.png"), full_page=True)
    row.get_by_role("link").click()
    _renders_the_log_once(page, client, sid)
    page.reload()
    _renders_the_log_once(page, client, sid)
    page.screenshot(path=str(shots / "panel-session-live.png"), full_page=True)

    page.get_by_role("button", name="Allow once").press("Enter")
    expect(page.get_by_role("heading", name="Review the change")).to_be_visible(timeout=60_000)
    expect(page.locator(".diff .line.add")).to_have_text(["+hi"])
    expect(page.locator(".diff .diff-file > summary")).to_have_text(["made.txt +1 -0"])
    page.screenshot(path=str(shots / "panel-review.png"), full_page=True)
    _renders_the_log_once(page, client, sid)
    _survives_a_dropped_connection(page, server, console)
    _downloads_and_applies_the_change(page, server)

    page.get_by_label("Follow-up message").fill("Thanks!")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(".timeline .ev-text .prose").last).to_have_text("Glad to help.")
    wait_for(client, sid, lambda v: v["status"] == "idle")
    _renders_the_log_once(page, client, sid)  # Events after the reconnection came once each.
    assert console.unexpected() == []
    page.context.close()


def _downloads_and_applies_the_change(page: Any, server: Server) -> None:
    """The patch is saved as a file, then Apply writes the change into the server's clone."""
    with page.expect_download() as download:
        page.get_by_role("button", name="Download patch").click()
    assert download.value.suggested_filename.endswith(".patch")
    patch = Path(download.value.path()).read_text()
    assert "made.txt" in patch and "\n+hi\n" in patch
    page.get_by_role("button", name="Apply").click()
    expect(page.get_by_role("heading", name="Review the change")).to_be_hidden(timeout=60_000)
    expect(page.locator(".timeline .ev-applied")).to_contain_text("was applied", timeout=60_000)
    made = list((server.data / "checkouts").glob("*/made.txt"))
    assert [p.read_text() for p in made] == ["hi\n"]


def _start_from_the_form(
    page: Any, server: Server, name: str, turns: list[dict[str, object]], plan_first: bool = False
) -> str:
    """Fill the new-task form for a new repository on the server, with a scripted model playing
    `turns`; returns the new session's id."""
    page.get_by_label("Task", exact=True).fill("make a file")
    page.get_by_label("Path on the server").fill(str(server.repo(name)))
    page.get_by_label("Model (optional)").fill(server.script(turns, f"{name}.json"))
    page.get_by_label("Permission mode").select_option("default")
    page.get_by_label("Plan first").set_checked(plan_first)
    page.get_by_role("button", name="Start").click()
    page.wait_for_url("**/#/sessions/*")
    sid = page.url.rsplit("/", 1)[1]
    expect(page.get_by_role("heading", name="make a file")).to_be_visible()
    return sid


def _renders_the_log_once(page: Any, client: httpx.Client, sid: str) -> None:
    """The timeline shows each event of the session's log once: as many items of each kind as
    the log has events, and each reply's text as its deltas add up to."""
    events = [r["event"] for r in client.get(f"/sessions/{sid}/events").json()]
    last = client.get(f"/sessions/{sid}").json()["last_seq"]
    expect(page.locator(".timeline")).to_have_attribute("data-last-seq", str(last))
    kinds = {
        "user": "user_message",
        "tool": "tool_call_requested",
        "permission": "permission_decided",
        "checkpoint": "checkpoint_created",
        "ask": "approval_requested",
        "finished": "session_finished",
    }
    for kind, event_type in kinds.items():
        expected = sum(e["type"] == event_type for e in events)
        assert page.locator(f".timeline .ev-{kind}").count() == expected, kind
    replies: dict[str, str] = {}
    for e in events:
        if e["type"] == "model_text_delta":
            replies[e["request_id"]] = replies.get(e["request_id"], "") + e["text"]
    shown = page.locator(".timeline .ev-text .prose").all_inner_texts()
    assert shown == list(replies.values())


def _survives_a_dropped_connection(page: Any, server: Server, console: Console) -> None:
    """The server restarts on the same port: the live stream drops, and the page reconnects
    with the last event it had (the session waits for review meanwhile, so it is not cut)."""
    connection = page.locator(".connection")
    expect(connection).to_have_text("live")
    assert console.unexpected() == []
    port = server.url.rsplit(":", 1)[1]
    server.stop()
    expect(connection).to_have_text("reconnecting…", timeout=15_000)
    server.extra_args = ["--port", port]  # The last --port given wins.
    server.start()
    expect(connection).to_have_text("live", timeout=20_000)
    assert console.unexpected(*DROPPED) == []  # The browser reports the dropped requests.
    console.errors.clear()


def test_another_tenant_sees_nothing_and_the_panel_fits_a_phone(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    owner = server.token("owner")
    client = server.client(owner)
    body = {"task": f"say {HOSTILE}", "source": {"path": str(server.repo("owned"))}}
    body["model"] = server.script([{"text": HOSTILE}], "owned.json")
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["status"] == "idle" and v["finished"] == "done")

    console = Console()
    page = new_page(browser, console, viewport=PHONE)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    sign_in(page, server.url, owner)
    expect(page.locator(f'li[data-id="{sid}"] .task')).to_have_text(f"say {HOSTILE}")
    page.goto(f"{server.url}/#/sessions/{sid}")
    expect(page.locator(".timeline .ev-finished")).to_contain_text("done")
    expect(page.locator(".timeline .ev-text .prose")).to_have_text(HOSTILE)  # Shown as text.
    assert page.locator("main img, main script").count() == 0 and dialogs == []
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.screenshot(path=str(shots_folder(tmp_path) / "panel-phone.png"), full_page=True)

    intruder = new_page(browser, console, viewport=PHONE)
    sign_in(intruder, server.url, server.token("intruder"))
    expect(intruder.get_by_text("No sessions yet")).to_be_visible()
    assert intruder.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    intruder.screenshot(path=str(shots_folder(tmp_path) / "panel-phone-list.png"), full_page=True)
    intruder.goto(f"{server.url}/#/sessions/{sid}")
    expect(intruder.get_by_role("heading", name="Session not found")).to_be_visible()
    expect(intruder.get_by_role("alert")).to_contain_text("no session")
    assert "say " not in intruder.locator("main").inner_text()
    assert console.unexpected(NOT_FOUND) == []
    page.context.close()
    intruder.context.close()


def test_a_plan_is_proposed_then_approved_in_the_panel(server: Server, browser: Any) -> None:
    token = server.token("planner")
    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    plan = {"summary": "One small step.", "steps": [{"id": "a", "title": "Write made.txt"}]}
    turns = [
        {"text": "Here is my plan.", "tool_calls": [{"name": "propose_plan", "arguments": plan}]},
        {"text": "Done as planned."},
    ]
    sid = _start_from_the_form(page, server, "planned", turns, plan_first=True)
    expect(page.get_by_role("heading", name="Approve the plan")).to_be_visible(timeout=60_000)
    expect(page.locator(".timeline .ev-plan")).to_contain_text("Write made.txt")
    page.get_by_role("button", name="Approve plan").click()
    expect(page.locator(".timeline .ev-text .prose").last).to_have_text("Done as planned.")
    expect(page.locator(".timeline .ev-finished").last).to_contain_text("done")
    expect(page.get_by_role("heading", name="Approve the plan")).to_be_hidden()
    _renders_the_log_once(page, server.client(token), sid)
    assert console.unexpected() == []
    page.context.close()
