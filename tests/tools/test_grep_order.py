"""ripgrep runs unsorted on every core; the tool puts its per-file blocks back in path order."""

from __future__ import annotations

import json
from typing import Any

from kestrel.tools.search import GrepCollector, sorted_by_file


def compact(event: dict[str, Any]) -> str:
    """As ripgrep writes its JSON: no spaces."""
    return json.dumps(event, separators=(",", ":"))


def block(path: str, lines: list[int]) -> list[str]:
    out = [compact({"type": "begin", "data": {"path": {"text": path}}})]
    for n in lines:
        data = {
            "path": {"text": path},
            "lines": {"text": f"hit {n}\n"},
            "line_number": n,
            "submatches": [{"start": 0, "end": 3}],
        }
        out.append(compact({"type": "match", "data": data}))
    out.append(compact({"type": "end", "data": {"path": {"text": path}}}))
    return out


def test_blocks_come_back_in_path_order_and_counts_survive_the_limit() -> None:
    raw = "\n".join(
        [
            *block("z.py", [1, 2]),
            *block("a.py", [5]),
            *block("m/b.py", [3, 4, 9]),
            compact({"type": "summary", "data": {}}),
        ]
    )
    ordered = sorted_by_file(raw)
    paths = [json.loads(x)["data"]["path"]["text"] for x in ordered.splitlines() if "begin" in x]
    assert paths == ["a.py", "m/b.py", "z.py"]
    collector = GrepCollector(context=0, limit=2)
    collector.feed(ordered)
    report = collector.report()
    assert [(m.path, m.line_number) for m in report.matches] == [("a.py", 5), ("m/b.py", 3)]
    assert report.total_matches == 6 and report.total_files == 3
