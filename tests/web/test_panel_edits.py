"""The panel's editing views in a real Chromium against a real `kestrel serve`: a plan edited in
the page and approved, a review sent back with a comment on a line of the diff, a rewind from the
checkpoints' timeline, and the cost and usage figures as the API gives them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from panel_kit import DESKTOP, PHONE, Console, new_page, shots_folder, sign_in
from playwright.sync_api import expect
from server_kit import Server, wait_for

USAGE = {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.25}
WRITE = {"name": "write_file", "arguments": {"path": "made.txt", "content": "hi\nthere\n"}}


def _events(client: httpx.Client, sid: str, kind: str) -> list[dict[str, Any]]:
    records = client.get(f"/sessions/{sid}/events").json()
    return [r["event"] for r in records if r["event"]["type"] == kind]


def _dollars(n: float) -> str:
    return f"${n:.4f}" if 0 < n < 0.01 else f"${n:.2f}"


def test_a_plan_is_edited_in_the_page_and_approved(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    token = server.token("editor")
    client = server.client(token)
    steps = [
        {"id": "a", "title": "Read the code"},
        {"id": "b", "title": "Write made.txt", "files": ["made.txt"], "depends_on": ["a"]},
        {"id": "c", "title": "Run the tests", "depends_on": ["b"]},
    ]
    propose = {"name": "propose_plan", "arguments": {"summary": "Three steps.", "steps": steps}}
    turns = [{"text": "My plan.", "tool_calls": [propose]}, {"text": "Done as edited."}]
    body = {"task": "plan it", "source": {"path": str(server.repo("edited"))}, "plan_first": True}
    body["model"] = server.script(turns, "edit.json")
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "plan" and v["status"] == "idle")

    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    page.goto(f"{server.url}/#/sessions/{sid}")
    region = page.get_by_role("region", name="Approve the plan")
    expect(region.get_by_label("Step 3", exact=True)).to_have_value("Run the tests")
    expect(region.get_by_label("Step 3 comes after (step ids)")).to_have_value("b")

    region.get_by_role("button", name="Delete step 2").click()  # Step c no longer waits on b.
    expect(region.get_by_label("Step 2", exact=True)).to_have_value("Run the tests")
    expect(region.get_by_label("Step 2 comes after (step ids)")).to_have_value("")
    region.get_by_label("Step 1", exact=True).fill("Read the code, briefly")
    region.get_by_role("button", name="Move up step 2").press("Enter")  # By keyboard.
    expect(region.get_by_label("Step 1", exact=True)).to_have_value("Run the tests")
    expect(region.get_by_role("button", name="Move down step 1")).to_be_focused()
    region.get_by_role("button", name="Add a step").click()
    expect(region.get_by_label("Step 3", exact=True)).to_be_focused()
    page.keyboard.type("Tell the person")
    region.get_by_label("Step 3 comes after (step ids)").fill("a, nope")
    region.get_by_role("button", name="Approve as edited").click()
    expect(region.get_by_role("alert")).to_contain_text("'nope', which is not a step")
    expect(region.get_by_label("Step 2", exact=True)).to_have_value("Read the code, briefly")
    page.screenshot(path=str(shots_folder(tmp_path) / "panel-plan-edit.png"), full_page=True)

    region.get_by_label("Step 3 comes after (step ids)").fill("a")
    region.get_by_role("button", name="Approve as edited").click()
    expect(page.locator(".timeline .ev-text .prose").last).to_have_text("Done as edited.")
    expect(page.locator(".timeline .ev-answer").last).to_contain_text("approved as you edited it")
    (decided,) = _events(client, sid, "plan_decided")
    assert decided["edited"] and decided["decision"] == "approved"
    titles = ["Run the tests", "Read the code, briefly", "Tell the person"]
    assert [s["title"] for s in decided["steps"]] == titles
    assert [s["id"] for s in decided["steps"]] == ["c", "a", "step-3"]
    assert [s["depends_on"] for s in decided["steps"]] == [[], [], ["a"]]
    assert console.unexpected("status of 400") == []
    page.context.close()


def test_a_review_is_sent_back_with_a_line_comment_then_rewound(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    shots = shots_folder(tmp_path)
    token = server.token("reviewer")
    client = server.client(token)
    turns = [
        {"text": "Writing it.", "tool_calls": [WRITE], "usage": USAGE},
        {"text": "All done.", "usage": USAGE},
        {"text": "Fixed as you asked.", "usage": USAGE},
    ]
    body = {"task": "make a file", "source": {"path": str(server.repo("reviewed"))}}
    body |= {"model": server.script(turns, "review.json"), "permission_mode": "default"}
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")
    (question,) = client.get(f"/sessions/{sid}/approvals").json()
    client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})
    wait_for(client, sid, lambda v: v["status"] == "idle" and v["waiting_on"] == "review")

    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    page.goto(f"{server.url}/#/sessions/{sid}")
    review = page.get_by_role("region", name="Review the change")
    expect(review.locator(".diff .line.add")).to_have_text(["+hi", "+there"])
    review.get_by_role("button", name="Comment on made.txt line 2").click()
    expect(review.get_by_label("Your comment on made.txt line 2")).to_be_focused()
    page.keyboard.type("Say world instead.")
    review.get_by_label("What to change").fill("Keep it short.")
    page.screenshot(path=str(shots / "panel-review-comments.png"), full_page=True)
    review.get_by_role("button", name="Send back with comments (1)").click()
    expect(page.locator(".timeline .ev-text .prose").last).to_have_text("Fixed as you asked.")
    sent = _events(client, sid, "user_message")[-1]["text"]
    for part in ("made.txt line 2", "+there", "Say world instead.", "Keep it short."):
        assert part in sent, (part, sent)
    wait_for(client, sid, lambda v: v["status"] == "idle" and v["waiting_on"] == "review")

    _shows_the_cost_as_the_api_gives_it(page, client, sid)
    _rewinds_to_the_first_checkpoint(page, client, sid, shots)
    page.get_by_role("link", name="All sessions").click()
    _shows_the_usage_as_the_api_gives_it(page, client)
    page.screenshot(path=str(shots / "panel-list-usage.png"), full_page=True)
    assert console.unexpected() == []
    page.context.close()


def _rewinds_to_the_first_checkpoint(
    page: Any, client: httpx.Client, sid: str, shots: Path
) -> None:
    """The timeline lists the checkpoints; a dialog confirms the rewind (Escape keeps all as
    it is); afterwards the change under review is empty."""
    timeline = page.get_by_role("region", name="Checkpoints")
    items = timeline.locator("li.checkpoint")
    expect(items).to_have_count(len(client.get(f"/sessions/{sid}/checkpoints").json()))
    expect(items.nth(0)).to_contain_text("before the first change")
    expect(items.nth(1)).to_contain_text("A made.txt")
    timeline.get_by_role("button", name="Rewind here: checkpoint 1").click()
    dialog = page.get_by_role("dialog", name="Rewind to checkpoint 1?")
    expect(dialog).to_be_visible()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert "+there" in client.get(f"/sessions/{sid}/diff").text  # Nothing happened.

    timeline.get_by_role("button", name="Rewind here: checkpoint 1").click()
    page.screenshot(path=str(shots / "panel-rewind-dialog.png"), full_page=True)
    dialog.get_by_role("button", name="Rewind", exact=True).click()
    expect(dialog).to_be_hidden()
    rewound = page.locator(".timeline .ev-rewound")
    expect(rewound).to_contain_text("checkpoint 1 (before the first change)")
    review = page.get_by_role("region", name="Review the change")
    expect(review).to_contain_text("The change is empty.")
    expect(items.nth(1)).to_contain_text("rewound past")
    assert "+there" not in client.get(f"/sessions/{sid}/diff").text
    page.screenshot(path=str(shots / "panel-checkpoints.png"), full_page=True)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.screenshot(path=str(shots / "panel-phone-checkpoints.png"), full_page=True)
    page.set_viewport_size(DESKTOP)


def _shows_the_cost_as_the_api_gives_it(page: Any, client: httpx.Client, sid: str) -> None:
    cost = client.get(f"/sessions/{sid}/cost").json()
    assert cost["cost_usd"] == 0.75  # Three turns at 0.25.
    section = page.get_by_role("region", name="Cost")
    expect(section.locator('[data-figure="tokens"]')).to_have_text(f"{cost['tokens']:,}")
    expect(section.locator('[data-figure="input"]')).to_have_text(f"{cost['input_tokens']:,}")
    expect(section.locator('[data-figure="output"]')).to_have_text(f"{cost['output_tokens']:,}")
    expect(section.locator('[data-figure="dollars"]')).to_have_text(_dollars(cost["cost_usd"]))
    expect(section.locator('[data-figure="cache"]')).to_have_text("0% of input")
    (model,) = cost["models"]
    cells = [model["model"], str(model["calls"]), f"{model['tokens']:,}", "0%", _dollars(0.75)]
    expect(section.locator(f'tr[data-model="{model["model"]}"] > *')).to_have_text(cells)


def _shows_the_usage_as_the_api_gives_it(page: Any, client: httpx.Client) -> None:
    usage = client.get("/usage").json()
    plan = usage["plan"]
    section = page.get_by_role("region", name="Today, on the pro plan")
    tokens = f"{usage['tokens_today']:,} of {plan['tokens_per_day']:,}"
    expect(section.locator('[data-figure="tokens"]')).to_have_text(tokens)
    dollars = f"{_dollars(usage['usd_today'])} of {_dollars(plan['usd_per_day'])}"
    expect(section.locator('[data-figure="dollars"]')).to_have_text(dollars)
    running = f"{usage['running']} of {plan['max_concurrent_sessions']}"
    expect(section.locator('[data-figure="running"]')).to_have_text(running)
    assert usage["usd_today"] == 0.75
