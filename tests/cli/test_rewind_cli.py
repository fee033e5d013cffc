"""`kestrel checkpoints` and `kestrel rewind` on a real session."""

from __future__ import annotations

import json
import re

from cli_kit import BUGGY, Env, lines_of


def test_checkpoints_list_and_rewind_then_continue(env: Env) -> None:
    done = env.run(*env.headless("--output-format", "json"))
    session_id = json.loads(done.stdout)["session_id"]
    fixed = (env.project / "calc.py").read_text()
    assert fixed != BUGGY

    listed = env.run("checkpoints", session_id[:8])
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert "before the first change" in lines[0]
    assert any("after edit_file" in line for line in lines)
    assert "    M calc.py" in lines and "    A NOTES.md" in lines
    baseline = lines[0].split()[0]

    rewound = env.run("rewind", session_id, baseline, "-p")
    assert rewound.returncode == 0, rewound.stderr
    assert "Rewound the files" in rewound.stderr
    # The rewind happened in the session's overlay: the checkout changes when it is applied.
    assert (env.project / "calc.py").read_text() == fixed
    review = env.run("diff", session_id)
    assert review.returncode == 0, review.stderr
    assert "-    return a + b" in review.stdout and "+    return a - b" in review.stdout
    assert "D NOTES.md" in review.stdout
    applied = env.run("apply", session_id)
    assert applied.returncode == 0, applied.stderr
    assert (env.project / "calc.py").read_text() == BUGGY
    assert not (env.project / "NOTES.md").exists()
    assert "(rewound)" in env.run("checkpoints", session_id).stdout

    again = env.run(
        "rewind",
        session_id,
        baseline,
        "fix it again",
        "-p",
        "--permission-mode",
        "accept-edits",
        "--output-format",
        "json",
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["reason"] == "done"
    assert (env.project / "calc.py").read_text() == fixed
    kinds = [r["event"]["type"] for r in lines_of(env.run("sessions", "export", session_id).stdout)]
    assert kinds.count("rewound") == 2


def test_rewind_to_an_unknown_checkpoint_is_a_usage_error(env: Env) -> None:
    done = env.run(*env.headless("--output-format", "json"))
    session_id = json.loads(done.stdout)["session_id"]
    bad = env.run("rewind", session_id, "ffffffff", "-p")
    assert bad.returncode == 2
    assert re.search(r"no checkpoint of session \w+ matches 'ffffffff'", bad.stderr)
