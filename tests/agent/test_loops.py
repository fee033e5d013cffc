from kestrel.agent.loops import LoopDetector, signature
from kestrel.protocol.messages import ToolCall


def feed(detector: LoopDetector, items: str) -> list[str | None]:
    out = []
    for item in items:
        verdict = detector.observe(item)
        out.append(None if verdict is None else f"{verdict.pattern}:{verdict.action}")
    return out


def test_repeat_warns_once_then_stops() -> None:
    assert feed(LoopDetector(3, 5), "AAAAA") == [None, None, "repeat:warn", None, "repeat:stop"]


def test_alternation_warns_then_stops() -> None:
    verdicts = feed(LoopDetector(3, 5), "ABABABABAB")
    assert verdicts[5] == "alternate:warn"
    assert verdicts[9] == "alternate:stop"
    assert all(v is None for v in verdicts[:5])


def test_progress_resets_the_streak() -> None:
    detector = LoopDetector(3, 5)
    assert feed(detector, "AAACAAA") == [None, None, "repeat:warn", None, None, None, "repeat:warn"]


def test_varied_calls_never_trigger() -> None:
    assert set(feed(LoopDetector(3, 5), "ABCDEFGHAB")) == {None}


def test_signature_ignores_argument_order_but_not_result() -> None:
    a = ToolCall(id="1", name="grep", arguments='{"pattern": "x", "path": "."}')
    b = ToolCall(id="2", name="grep", arguments='{"path": ".", "pattern": "x"}')
    assert signature(a, "out") == signature(b, "out")
    assert signature(a, "out") != signature(a, "other")
    bad = ToolCall(id="3", name="grep", arguments="{oops")
    assert signature(bad, "") != signature(a, "")
