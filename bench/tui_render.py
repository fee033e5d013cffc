"""What the full-screen view costs the terminal: frames and bytes per streamed token, and memory
after a long session.

Each measurement runs the real view in a child process on a pseudo-terminal of 120x40 (the
terminal driver Kestrel uses in a real terminal, with its writes counted), against the scripted
model, in a temporary project with its home and data in a temporary folder:

- `stream`: one reply of `--words` words, streamed piece by piece; prints the pieces the log
  holds (streamed tokens), the driver's writes (frames) and the bytes written, per token;
- `echo`: a command that prints about 10 MB while a key is typed into the prompt every
  0.25 s; prints how long each took to show (p50, p99, max);
- `long`: a session of about `--events` log records (turns that say a line and search);
  prints the records, the widgets on screen, and the process's peak resident memory.

    python bench/tui_render.py [--words 2000] [--events 5000]

It prints figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import resource
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

ROWS, COLUMNS = 40, 120


def _script(kind: str, words: int, events: int) -> list[dict[str, Any]]:
    usage = {"input_tokens": 1000, "output_tokens": 50, "cost_usd": 0.0}
    if kind == "stream":
        text = " ".join(f"word{i}" + ("\n\n" if i % 60 == 59 else "") for i in range(words))
        return [{"text": text, "usage": usage}]
    if kind == "echo":
        # About 10 MB of command output, while keys are typed into the prompt.
        # 100 chunks of 100 KB, a little apart, so keys are typed while it streams.
        command = (
            "python3 -c 'import sys, time\n"
            "for _ in range(100):\n"
            '    sys.stdout.write(("x" * 99 + "\\n") * 1000); sys.stdout.flush(); '
            "time.sleep(0.05)'"
        )
        call = {"name": "bash", "arguments": {"command": command, "timeout": 600}}
        return [{"tool_calls": [call], "usage": usage}, {"text": "Done.", "usage": usage}]
    turns = max(events // 10, 1)  # A turn that says a line and searches logs about ten.
    script: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: searching for `name{i}`.",
            "tool_calls": [{"name": "grep", "arguments": {"pattern": f"name{i}"}}],
            "usage": usage,
        }
        for i in range(turns)
    ]
    return [*script, {"text": "Done.", "usage": usage}]


def child(kind: str, script: Path, out: Path) -> None:
    """Run the view until the session's step ends; write the figures to `out`."""
    from textual.drivers.linux_driver import LinuxDriver

    from kestrel import app
    from kestrel.service.sessions import settings_for
    from kestrel.tui.app import KestrelApp, ViewOptions

    counts = {"writes": 0, "bytes": 0, "widgets": 0}

    class CountingDriver(LinuxDriver):
        def write(self, data: str) -> None:
            counts["writes"] += 1
            counts["bytes"] += len(data.encode("utf-8", "replace"))
            super().write(data)

    cwd = Path.cwd()
    flags: dict[str, object] = {
        "model": f"scripted:{script}",
        "workspace": "direct",
        "max_turns": 100_000,
        "allow": ["Bash(python3 -c *)"],  # no question stops the echo run's command
    }
    settings = settings_for(cwd, flags)
    store = app.open_store(settings)
    view = KestrelApp(store, settings, cwd, ViewOptions(task="go", timings=False))
    view.driver_class = CountingDriver
    started = time.perf_counter()

    def check() -> None:
        sid = view.driver.session_id
        if sid and not view.driver.busy and time.perf_counter() - started > 1:
            counts["widgets"] = len(list(view.query("*")))
            view.exit(0)

    view.call_later(lambda: view.set_interval(0.5, check))
    echoes: list[float] = []
    if kind == "echo":
        view.call_later(lambda: _type_while_busy(view, echoes))
    view.run()
    counts["echo_ms"] = echoes  # type: ignore[assignment]
    sid = view.driver.session_id or ""
    records = store.read(sid) if sid else []
    tokens = sum(1 for r in records if r.event.type == "model_text_delta")
    figures = {
        **counts,
        "records": len(records),
        "tokens": tokens,
        "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    out.write_text(json.dumps(figures))
    store.close()


def _type_while_busy(view: Any, echoes: list[float]) -> None:
    """Every 0.25 s while the step runs, type a key into the prompt as the terminal would and
    time until the prompt shows it (the view's queue is what a busy view delays)."""
    from kestrel.tui.prompt import PromptInput

    pending: dict[str, float] = {}

    def type_one() -> None:
        if not view.driver.busy or pending:
            return
        pending["at"] = time.perf_counter()
        pending["length"] = len(view.query_one(PromptInput).text)
        view.simulate_key("z")

    def watch() -> None:
        if pending and len(view.query_one(PromptInput).text) > pending["length"]:
            echoes.append((time.perf_counter() - pending.pop("at")) * 1000)
            pending.clear()

    view.query_one(PromptInput).focus()
    view.set_interval(0.25, type_one)
    view.set_interval(0.002, watch)


def measure(kind: str, words: int, events: int) -> dict[str, Any]:
    """Run one child on a pseudo-terminal, drain its output, and read its figures."""
    with tempfile.TemporaryDirectory(prefix="kestrel-tui-bench-") as tmp:
        folder = Path(tmp)
        project = folder / "project"
        project.mkdir()
        (project / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        script = folder / "script.json"
        script.write_text(json.dumps(_script(kind, words, events)))
        out = folder / "figures.json"
        home = folder / "home"
        (home / ".config").mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
        env.update(
            HOME=str(home),
            XDG_CONFIG_HOME=str(home / ".config"),
            KESTREL_DATA_DIR=str(folder / "data"),
            KESTREL_SANDBOX="bwrap" if shutil.which("bwrap") else "none",
            TERM="xterm-256color",
        )
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        argv = [sys.executable, __file__, "--child", kind, str(script), str(out)]
        proc = subprocess.Popen(argv, cwd=project, env=env, stdin=slave, stdout=slave, stderr=slave)
        os.close(slave)
        seen = 0
        while proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += len(os.read(master, 1 << 16))
                except OSError:
                    break
        os.close(master)
        figures: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
        figures["pty_bytes_read"] = seen
        return figures


def main() -> None:
    """Measure both and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=2000)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--child", nargs=3, metavar=("KIND", "SCRIPT", "OUT"))
    args = parser.parse_args()
    if args.child:
        kind, script, out = args.child
        child(kind, Path(script), Path(out))
        return
    stream = measure("stream", args.words, args.events)
    tokens = max(stream.get("tokens", 0), 1)
    writes, written = stream.get("writes", 0), stream.get("bytes", 0)
    print(f"stream: {stream.get('tokens')} streamed tokens (log pieces), {COLUMNS}x{ROWS}")
    print(f"  frames written: {writes} ({writes / tokens:.3f} per token)")
    print(f"  bytes written:  {written} ({written / tokens:.1f} per token)")
    echo = measure("echo", args.words, args.events)
    typed = sorted(echo.get("echo_ms") or [0.0])
    p99 = typed[min(len(typed) - 1, int(0.99 * len(typed)))]
    print(f"echo: {len(echo.get('echo_ms') or [])} keys typed while ~10 MB of output streamed")
    print(
        f"  key -> in the prompt: p50 {typed[len(typed) // 2]:.0f} ms, p99 {p99:.0f} ms, "
        f"max {typed[-1]:.0f} ms"
    )
    long = measure("long", args.words, args.events)
    print(f"long: {long.get('records')} log records")
    print(f"  widgets on screen: {long.get('widgets')}")
    print(f"  peak resident memory: {long.get('max_rss_mib', 0):.1f} MiB")
    print(f"  frames written: {long.get('writes')}, bytes written: {long.get('bytes')}")


if __name__ == "__main__":
    main()
