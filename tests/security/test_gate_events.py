"""What the gate puts in the hand-off's events: findings among the flagged paths, a refusal that
names them (capped) and says how to accept them, and the accepted ones in the applied event."""

from __future__ import annotations

from security_kit import APP, AWS_KEY

from kestrel.workspace.apply import ApplyResult
from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.handoff import (
    MAX_FINDINGS_LISTED,
    Pending,
    applied_event,
    ready_event,
    security_refused,
)
from kestrel.workspace.verify.security import finding_lines, gate_change_set


def _pending(new: str) -> Pending:
    change = Change(
        path="app/settings.py", base=Entry("file", APP.encode()), new=Entry("file", new.encode())
    )
    return Pending(ChangeSet((change,)), None, "head")


def test_findings_are_flagged_and_a_refusal_says_how_to_accept_them() -> None:
    pending = _pending(APP + f'KEY = "{AWS_KEY}"\n')
    gate = gate_change_set(pending.changes)

    ready = ready_event(pending, gate)
    refused = security_refused(gate, "head", "abc123")

    [flag] = [f for f in ready.flagged if "AWS access key" in f]
    assert flag.startswith("app/settings.py:8: ") and flag.endswith("(blocks the apply)")
    assert refused.outcome == "refused" and refused.written == ()
    assert refused.problems[0].startswith("app/settings.py:8: adds an AWS access key")
    assert "`kestrel apply abc123 --accept-security-findings`" in refused.problems[-1]
    assert AWS_KEY not in str(ready) + str(refused)


def test_many_findings_are_capped_in_events_but_all_accepted_are_recorded() -> None:
    keys = "".join(f'KEY_{n} = "AKIAZ3MNQ7T4XKD2{n:04d}"\n' for n in range(MAX_FINDINGS_LISTED + 9))
    gate = gate_change_set(_pending(APP + keys).changes)

    refused = security_refused(gate, "head", "abc123")
    applied = applied_event(ApplyResult(applied=True), "head", finding_lines(gate.blocking))

    assert len(gate.blocking) == MAX_FINDINGS_LISTED + 9
    assert len(refused.problems) == MAX_FINDINGS_LISTED + 2
    assert refused.problems[-2] == "… 9 more security findings"
    assert len(applied.accepted_findings) == MAX_FINDINGS_LISTED + 9
