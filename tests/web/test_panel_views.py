"""The panel's richer views in a real Chromium against a real `kestrel serve`: a change reviewed
per file, unified and side by side, with highlighted code and line comments in both; a test
runner's colours in a tool's output; a subagent as a group of its own; the context compacted, a
loop caught and a budget near its end as one-line items.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
from panel_kit import PHONE, Console, axe_violations, new_page, shots_folder, sign_in
from playwright.sync_api import expect
from server_kit import Server, wait_for

CALC = "def add(a, b):\n    return a + b\n"
CALC_NEW = 'def add(a, b):\n    """Add two numbers."""\n    return b + a  # the same\n'
SCRIPT = "#!/bin/sh\necho 'hello' # greet\n"
WRITES = [
    {"name": "write_file", "arguments": {"path": "calc.py", "content": CALC_NEW}},
    {"name": "write_file", "arguments": {"path": "hello.sh", "content": SCRIPT}},
]
COLOURED = r"printf '\033[1;31mFAIL\033[0m test_x\n\033]0;title\007\033[32mPASS\033[0m test_y\n'"
GUARDED = "max_output_tokens = 1000\n[limits]\nmax_turns = 5\n[compaction]\nwindow_tokens = 16000\n"
"""A small context window and few turns: the run below is compacted and warned of its budget."""


def _repo(server: Server, name: str, files: dict[str, str]) -> Path:
    """A repository on the server with `files` committed besides its README."""
    root = server.repo(name)
    if not files:
        return root
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "files"], cwd=root, check=True)
    return root


def _start(
    server: Server,
    client: httpx.Client,
    name: str,
    turns: list[Any],
    files: dict[str, str],
    mode: str = "bypass",
) -> str:
    """A session on a new repository with `files`, its model playing `turns`; in bypass mode
    it asks nothing (and leaves nothing for review)."""
    repo = _repo(server, name, files)
    body = {"task": f"{name} task", "source": {"path": str(repo)}, "permission_mode": mode}
    body["model"] = server.script(turns, f"{name}.json")
    return str(client.post("/sessions", json=body).json()["id"])


def _allow_until_review(client: httpx.Client, sid: str) -> None:
    """Allow each write the session asks about, until its change waits for review."""
    while True:
        view = wait_for(client, sid, lambda v: v["waiting_on"] in ("approval", "review"))
        if view["waiting_on"] == "review" and view["status"] == "idle":
            return
        for question in client.get(f"/sessions/{sid}/approvals").json():
            client.post(f"/sessions/{sid}/approvals/{question['call_id']}", json={"allow": True})


def _events(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    return [r["event"] for r in client.get(f"/sessions/{sid}/events").json()]


def test_a_change_is_reviewed_unified_and_side_by_side_with_comments(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    shots = shots_folder(tmp_path)
    token = server.token("views")
    client = server.client(token)
    turns = [{"text": "Writing.", "tool_calls": WRITES}, {"text": "Done."}, {"text": "Fixed."}]
    sid = _start(server, client, "viewed", turns, {"calc.py": CALC}, "default")
    _allow_until_review(client, sid)

    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    page.goto(f"{server.url}/#/sessions/{sid}")
    review = page.get_by_role("region", name="Review the change")
    files = review.locator(".diff-file > summary")
    expect(files).to_have_text(["calc.py +2 -1", "hello.sh +2 -0"])
    expect(review.get_by_role("button", name="Unified")).to_have_attribute("aria-pressed", "true")
    unified = review.get_by_role("group", name="The change, as a unified diff")
    expect(unified.locator(".line.del")).to_have_text(["-    return a + b"])
    expect(unified.locator(".line.add").first).to_have_text('+    """Add two numbers."""')
    # The code is highlighted: Python's keyword and comment, the shell's string.
    expect(unified.locator(".line .tok-keyword").first).to_have_text("def")
    expect(unified.locator(".line.add .tok-comment")).to_have_text(["# the same", "# greet"])
    expect(unified.locator(".line.add .tok-string").last).to_have_text("'hello'")
    page.screenshot(path=str(shots / "panel-review-unified.png"), full_page=True)

    review.get_by_role("button", name="Side by side").click()
    split = review.get_by_role("group", name="The change, side by side")
    row = split.locator(".split-row").filter(has=page.locator(".line.del"))
    expect(row.locator(".half.old .line")).to_have_text("-    return a + b")
    expect(row.locator(".half.new .line")).to_have_text('+    """Add two numbers."""')
    page.reload()  # The view chosen is kept.
    expect(review.get_by_role("button", name="Side by side")).to_have_attribute(
        "aria-pressed", "true"
    )
    _comments_in_both_views(page, review, shots)
    assert axe_violations(page) == []

    review.get_by_label("What to change").fill("Otherwise fine.")
    review.get_by_role("button", name="Send back with comments (2)").click()
    expect(page.locator(".timeline .ev-text .prose").last).to_have_text("Fixed.")
    sent = [e for e in _events(client, sid) if e["type"] == "user_message"][-1]["text"]
    old, new = sent.index("line 2 of the old calc.py"), sent.index("calc.py line 3")
    assert old < new < sent.index("Otherwise fine."), sent  # In the diff's order.
    assert "Keep a + b." in sent and "Why swap?" in sent
    wait_for(client, sid, lambda v: v["status"] == "idle" and v["waiting_on"] == "review")
    expect(review.get_by_role("button", name="Discard")).to_be_enabled()
    review.get_by_role("button", name="Discard").click()
    expect(page.locator(".timeline .ev-applied")).to_contain_text("discarded", timeout=60_000)
    assert console.unexpected() == []
    page.context.close()


def _comments_in_both_views(page: Any, review: Any, shots: Path) -> None:
    """A comment made side by side stays, with its text, under its line in the unified view,
    and one made there shows under its line side by side."""
    review.get_by_role("button", name="Comment on line 2 of the old calc.py").click()
    page.keyboard.type("Keep a + b.")
    page.screenshot(path=str(shots / "panel-review-split.png"), full_page=True)
    review.get_by_role("button", name="Unified").click()
    box = review.get_by_label("Your comment on line 2 of the old calc.py")
    expect(box).to_have_value("Keep a + b.")
    del_row = review.locator(".diff-row").filter(has=page.locator(".line.del"))
    expect(del_row.locator("xpath=following-sibling::*[1]")).to_have_class("line-comment")
    review.get_by_role("button", name="Comment on calc.py line 3").click()
    page.keyboard.type("Why swap?")
    review.get_by_role("button", name="Side by side").click()
    expect(review.get_by_label("Your comment on calc.py line 3")).to_have_value("Why swap?")
    expect(review.locator(".split-row + .line-comment")).to_have_count(2)
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.screenshot(path=str(shots / "panel-phone-review-split.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


def test_colours_a_subagent_and_the_guards_show_in_the_timeline(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    shots = shots_folder(tmp_path)
    token = server.token("timeline")
    client = server.client(token)
    run = {"name": "bash", "arguments": {"command": COLOURED}}
    big = {"name": "bash", "arguments": {"command": "seq 1 4000"}}
    turns = [{"text": "Testing.", "tool_calls": [run]}]
    turns += [{"text": "Again.", "tool_calls": [big]} for _ in range(3)] + [{"text": "Stop."}]
    guarded = _start(server, client, "guarded", turns, {".kestrel/settings.toml": GUARDED})
    task = {"description": "look around", "prompt": "List the files.", "agent": "explore"}
    # The child plays the same script: its own `task` call is refused (the explore agent has
    # no such tool), then it reports; the parent then says the same.
    helper = [{"tool_calls": [{"name": "task", "arguments": task}]}, {"text": "README.md."}]
    helped = _start(server, client, "helped", helper, {})
    for sid in (guarded, helped):
        wait_for(client, sid, lambda v: v["status"] == "idle")

    console = Console()
    page = new_page(browser, console)
    sign_in(page, server.url, token)
    page.goto(f"{server.url}/#/sessions/{guarded}")
    output = page.locator(".timeline .ev-tool").first.locator("pre.output")
    expect(output).to_have_text("FAIL test_x\nPASS test_y\n[exit code 0]")
    expect(output.locator(".ansi-fg-1.ansi-bold")).to_have_text("FAIL")
    expect(output.locator(".ansi-fg-2")).to_have_text("PASS")
    _shows_the_guards(page, _events(client, guarded))
    page.screenshot(path=str(shots / "panel-timeline-guards.png"), full_page=True)
    assert axe_violations(page) == []

    page.goto(f"{server.url}/#/sessions/{helped}")
    group = page.locator(".timeline .ev-subagent")
    expect(group).to_have_count(1)
    summary = group.locator("summary")
    expect(summary).to_contain_text("explore: look around")
    expect(summary.locator(".tool-status")).to_have_text("done")
    nested = group.get_by_role("list", name="Events of the subagent: look around")
    expect(nested).to_be_hidden()  # Closed once its report is in.
    summary.click()
    expect(nested.locator(".ev-subagent-prompt")).to_contain_text("List the files.")
    expect(nested.locator(".subagent-finished")).to_contain_text("The explore agent finished: done")
    expect(nested.locator(".ev-subagent-report")).to_contain_text("README.md.")
    expect(nested.locator(".ev").last).to_have_class("ev ev-subagent-report")
    assert page.locator(".timeline > .ev-tool").count() == 0  # The call is the group.
    page.screenshot(path=str(shots / "panel-subagent.png"), full_page=True)
    assert axe_violations(page) == []
    assert console.unexpected() == []
    page.context.close()


def _shows_the_guards(page: Any, events: list[dict[str, Any]]) -> None:
    """One line for each compaction, loop and budget event of the log, saying what happened."""
    compacted = [e for e in events if e["type"] == "context_compacted"]
    assert compacted, [e["type"] for e in events]
    lines = page.locator(".timeline .ev-compacted")
    expect(lines).to_have_count(len(compacted))
    expect(lines.first).to_contain_text(f"{compacted[0]['dropped']} earlier messages folded")
    (loop,) = [e for e in events if e["type"] == "loop_detected"]
    expect(page.locator(".timeline .ev-loop")).to_have_text(f"Loop: warned {loop['detail']}")
    (budget,) = [e for e in events if e["type"] == "budget_warning"]
    assert (budget["budget"], budget["used"], budget["limit"]) == ("turns", 4, 5)
    expect(page.locator(".timeline .ev-budget")).to_have_text("Budget 4 of 5 turns used.")


PIECES = """async () => {
  const { AnsiWriter, stripAnsi } = await import('/assets/js/ansi.js');
  const pre = document.createElement('pre');
  const writer = new AnsiWriter(pre);
  for (const chunk of ['a\\x1b[3', '1mred\\x1b', '[0m \\x1b]0;t', 'itle\\x07b\\x1b[2K\\r\\n',
                       '\\x1b[38;5;4mblue\\x1b[38;2;1;2;3m!\\x1b[m\\x1b(Bc'])
    writer.write(chunk);
  const spans = [...pre.querySelectorAll('span')].map((s) => [s.className, s.textContent]);
  const strip = stripAnsi('\\x1b[1mok\\x1b[0m\\x1b[?25l');
  const { parseDiff, diffFiles } = await import('/assets/js/diff.js');
  const diff = ['diff --git a/x b/x', '--- a/x', '+++ b/x', '@@ -1,2 +1,2 @@',
                '--- not a header', '+++ nor this', ' x', ''].join('\\n');
  const files = diffFiles(parseDiff(diff)).map((f) => [f.name, f.added, f.removed]);
  const { Timeline } = await import('/assets/js/timeline.js');
  const list = document.createElement('ol');
  const timeline = new Timeline(list);
  timeline.add({ seq: 1, event: { type: 'loop_recovered', pattern: 'repeat',
    detail: 'the same call 3 times', to_seq: 7, checkpoint_id: 'abcdef0123456789', note: '' } });
  timeline.add({ seq: 2, event: { type: 'budget_notice', budget: 'cost', enforced: false,
    detail: 'no price is known for model x' } });
  const items = [...list.children].map((li) => li.textContent);
  return { text: pre.textContent, spans, strip, files, items };
}"""
"""Run in the page: the terminal writer, the diff's parser and the timeline on made-up input."""


def test_the_pieces_handle_what_a_run_seldom_prints(server: Server, browser: Any) -> None:
    """Escape sequences cut between chunks, titles and cursor moves, a removed line that looks
    like a file header, and the events no scripted run here logs."""
    console = Console()
    page = new_page(browser, console)
    page.goto(server.url + "/")
    found = page.evaluate(PIECES)
    assert found["text"] == "ared b\nblue!c"
    assert found["spans"] == [["ansi-fg-1", "red"], ["ansi-fg-4", "blue"]]
    assert found["strip"] == "ok"
    assert found["files"] == [["x", 1, 1]]
    assert found["items"] == [
        "Loop caught the same call 3 times; went back to event 7 (files restored to checkpoint "
        "abcdef012345) and asked for a different approach.",
        "Budget not enforced no price is known for model x",
    ]
    assert console.unexpected() == []
    page.context.close()
