import pytest

from kestrel.policy.modes import decide


@pytest.mark.parametrize(
    ("mode", "read", "edit", "execute"),
    [
        ("default", "allow", "ask", "ask"),
        ("accept-edits", "allow", "allow", "ask"),
        ("plan", "allow", "deny", "deny"),
        ("bypass", "allow", "allow", "allow"),
    ],
)
def test_mode_table(mode: str, read: str, edit: str, execute: str) -> None:
    assert decide(mode, "read").verdict == read  # type: ignore[arg-type]
    assert decide(mode, "edit").verdict == edit  # type: ignore[arg-type]
    assert decide(mode, "execute").verdict == execute  # type: ignore[arg-type]


def test_unknown_tool_is_let_through_to_fail_in_dispatch() -> None:
    assert decide("plan", None).verdict == "allow"
