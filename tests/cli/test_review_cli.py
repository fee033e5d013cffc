"""A session's change waits in its overlay: `kestrel diff`, `kestrel apply`, `kestrel discard`."""

from __future__ import annotations

import json

from cli_kit import BUGGY, Env

# Edits are allowed by rule, but the mode is the default one: nothing applies on its own.
REVIEWED = ("-p", "fix the failing tests", "--allow", "Edit(**)")


def _pending_session(env: Env) -> str:
    done = env.run(*REVIEWED, "--model", f"scripted:{env.script}", "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert "kestrel apply" in done.stderr and "kestrel diff" in done.stderr
    assert (env.project / "calc.py").read_text() == BUGGY
    assert not (env.project / "NOTES.md").exists()
    return str(json.loads(done.stdout)["session_id"])


def test_a_change_waits_for_review_and_applies_with_the_persons_own_edits(env: Env) -> None:
    session_id = _pending_session(env)

    stat = env.run("diff", session_id, "--stat")
    assert stat.returncode == 0, stat.stderr
    assert "2 files: 1 modified, 1 added" in stat.stdout
    assert "M calc.py" in stat.stdout and "A NOTES.md" in stat.stdout
    shown = env.run("diff", session_id[:8]).stdout
    assert "-    return a - b" in shown and "+    return a + b" in shown

    # Meanwhile the person edits another part of the same file: both edits survive.
    (env.project / "calc.py").write_text(BUGGY + "\n\ndef triple(x):\n    return 3 * x\n")
    applied = env.run("apply", session_id)
    assert applied.returncode == 0, applied.stderr
    assert "applied to the checkout" in applied.stderr and "merged" in applied.stderr
    text = (env.project / "calc.py").read_text()
    assert "return a + b" in text and "def triple(x):" in text
    assert (env.project / "NOTES.md").read_text() == "add() subtracted; fixed.\n"
    assert "no change waiting" in env.run("diff", session_id).stdout
    assert "no change waiting" in env.run("apply", session_id).stderr


def test_a_conflicting_change_is_not_applied_and_can_be_discarded(env: Env) -> None:
    session_id = _pending_session(env)
    mine = BUGGY.replace("return a - b", "return b + a")
    (env.project / "calc.py").write_text(mine)

    refused = env.run("apply", session_id)
    assert refused.returncode == 1
    assert "conflicts with your edits; nothing was applied" in refused.stderr
    assert "calc.py" in refused.stderr
    assert (env.project / "calc.py").read_text() == mine
    assert not (env.project / "NOTES.md").exists()  # All or nothing.

    dropped = env.run("discard", session_id)
    assert dropped.returncode == 0, dropped.stderr
    assert "discarded (2 files: 1 modified, 1 added)" in dropped.stderr
    assert (env.project / "calc.py").read_text() == mine
    assert "no change waiting" in env.run("diff", session_id).stdout


def test_direct_mode_edits_the_checkout_as_it_goes(env: Env) -> None:
    done = env.run(*REVIEWED, "--model", f"scripted:{env.script}", "--workspace", "direct")
    assert done.returncode == 0, done.stderr
    assert "return a + b" in (env.project / "calc.py").read_text()
    assert "kestrel apply" not in done.stderr


def test_resuming_a_finished_session_hands_its_waiting_change_over(env: Env) -> None:
    session_id = _pending_session(env)
    # Without a new message, resume finishes only what the run left: the hand-over.
    waiting = env.run("resume", session_id, "-p")
    assert waiting.returncode == 0, waiting.stderr
    assert "kestrel apply" in waiting.stderr
    assert (env.project / "calc.py").read_text() == BUGGY
    applied = env.run("resume", session_id, "-p", "--permission-mode", "accept-edits")
    assert applied.returncode == 0, applied.stderr
    assert "return a + b" in (env.project / "calc.py").read_text()
    # Once handed over, a resume without a message only says the session is finished.
    again = env.run("resume", session_id, "-p")
    assert again.returncode == 0, again.stderr
    assert again.stderr.startswith(f"Session {session_id} is finished. Follow up with:")
