"""The web panel in a real browser: how soon a logged event shows on the page, and how long a
long session takes to open.

Starts a real `kestrel serve` with the scripted model, signs Debian's Chromium (through
Playwright) in with a token, and:
1. opens a session's page right after creating it and records, in the page, when each event
   is applied to the DOM (a MutationObserver on the timeline's `data-last-seq`); latency is that
   moment minus the record's own timestamp (same machine, same clock), over the events logged
   after the page opened;
2. opens a finished session of `--big` turns' worth of events and times the page from
   navigation until its last event is on the page.

    python bench/web_latency.py [--turns 50] [--big 110]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from serve_load import _repo, latency_line, new_token, start_server

CHROMIUM = os.environ.get("KESTREL_CHROMIUM", "/usr/bin/chromium")
OBSERVE = """
window.__shown = {};
new MutationObserver((mutations) => {
  const now = performance.timeOrigin + performance.now();
  const byTarget = new Map();
  for (const m of mutations) {
    if (!byTarget.has(m.target)) byTarget.set(m.target, []);
    byTarget.get(m.target).push(m.oldValue);
  }
  for (const [target, olds] of byTarget) {
    const values = [...olds.slice(1), target.dataset.lastSeq];
    for (const v of values) if (v && !(v in window.__shown)) window.__shown[v] = now;
  }
}).observe(document, {subtree: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ["data-last-seq"]});
"""


def _turns(n: int, calls: int = 1) -> list[dict[str, Any]]:
    # A different search each time: the same call again and again would be stopped as a loop.
    turns: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: looking for names.",
            "tool_calls": [
                {"name": "grep", "arguments": {"pattern": f"name{i}x{j}"}} for j in range(calls)
            ],
        }
        for i in range(n)
    ]
    return [*turns, {"text": "Done."}]


def _wait_idle(client: httpx.Client, sid: str) -> dict[str, Any]:
    while True:
        shown = client.get(f"/sessions/{sid}").json()
        if shown["status"] == "idle" and shown["finished"]:
            return dict(shown)
        time.sleep(0.2)


def _shown_up_to(page: Any, last: int) -> None:
    try:
        page.wait_for_selector(f'[data-last-seq="{last}"]', state="attached", timeout=120_000)
    except Exception:
        got = page.evaluate("document.querySelector('[data-last-seq]')?.dataset.lastSeq")
        raise SystemExit(f"the page showed events up to {got} of {last} in two minutes") from None


def _live(page: Any, url: str, client: httpx.Client, body: dict[str, Any]) -> list[float]:
    sid = client.post("/sessions", json=body).json()["id"]
    opened = time.time()
    page.goto(f"{url}/#/sessions/{sid}")
    last = _wait_idle(client, sid)["last_seq"]
    _shown_up_to(page, last)
    shown: dict[str, float] = page.evaluate("window.__shown")
    events = client.get(f"/sessions/{sid}/events", params={"limit": 10_000}).json()
    return [
        shown[str(r["seq"])] / 1000 - r["at"]
        for r in events
        if r["at"] >= opened and str(r["seq"]) in shown
    ]


def _open_time(
    page: Any, url: str, client: httpx.Client, body: dict[str, Any]
) -> tuple[int, float]:
    sid = client.post("/sessions", json=body).json()["id"]
    finished = _wait_idle(client, sid)
    last = finished["last_seq"]
    if finished["finished"] != "done":
        raise SystemExit(f"the long session ended {finished['finished']}, not done")
    page.goto(f"{url}/#/sessions")
    start = time.perf_counter()
    page.goto(f"{url}/#/sessions/{sid}")
    _shown_up_to(page, last)
    return last, time.perf_counter() - start


SCROLL = """async () => {
  // Scroll the whole page from the bottom to the top in steps, one per frame, as a wheel would,
  // and keep each frame's interval: a long one is a visible stall (jank).
  const frames = [];
  window.scrollTo(0, document.body.scrollHeight);
  await new Promise((r) => requestAnimationFrame(r));
  let last = performance.now();
  while (window.scrollY > 0) {
    window.scrollBy(0, -400);
    await new Promise((r) => requestAnimationFrame(r));
    const now = performance.now();
    frames.push(now - last);
    last = now;
  }
  return frames;
}"""


def _scroll_frames(page: Any) -> list[float]:
    """Frame intervals (ms) while the open session's page is scrolled from bottom to top."""
    return list(page.evaluate(SCROLL))


def main() -> None:
    """Run both measurements and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=50, help="turns of the live session")
    parser.add_argument("--big", type=int, default=110, help="turns (8 calls each) of the long one")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="kestrel-web-latency-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    env["HOME"] = str(folder / "home")
    data, scripts, repo = folder / "data", folder / "scripts", folder / "repos" / "r"
    scripts.mkdir()
    _repo(repo)
    (scripts / "live.json").write_text(json.dumps(_turns(args.turns)))
    # Several calls a turn: a session's turns are capped (200 by default), its events are not.
    (scripts / "big.json").write_text(json.dumps(_turns(args.big, calls=8)))
    token = new_token(env, data, "web")
    server, url = start_server(env, data, 2, repo.parent, scripts)
    try:
        headers = {"Authorization": f"Bearer {token}"}
        client = httpx.Client(base_url=url + "/v1", headers=headers, timeout=120)

        def body(script: str) -> dict[str, Any]:
            model = f"scripted:{scripts / script}"
            return {"task": "read", "source": {"path": str(repo)}, "model": model}

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
            context = browser.new_context()
            context.add_init_script(f"sessionStorage.setItem('kestrel.token', {json.dumps(token)})")
            context.add_init_script(OBSERVE)
            page = context.new_page()
            latencies = _live(page, url, client, body("live.json"))
            events, opened_s = _open_time(page, url, client, body("big.json"))
            frames = _scroll_frames(page)
            nodes = page.evaluate("document.querySelectorAll('*').length")
            browser.close()
    finally:
        server.terminate()
        server.communicate(timeout=120)
        shutil.rmtree(folder, ignore_errors=True)
    print(f"live: {len(latencies)} events shown while the page was open")
    print(latency_line("event appended -> on the page", latencies))
    print(f"open a finished session of {events} events: {opened_s:.2f} s to its last event")
    print(f"its page: {nodes:,} elements; scrolled top to bottom in {len(frames)} frames")
    print(latency_line("frame interval while scrolling", [f / 1000 for f in frames]))
    print(f"frames over 50 ms: {sum(1 for f in frames if f > 50)}")


if __name__ == "__main__":
    main()
