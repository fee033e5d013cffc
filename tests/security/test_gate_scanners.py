"""The security gate's scanners over values: what each risky change looks like to it, which
findings block, that only added lines are blamed, and that bad input never breaks it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from security_kit import APP, AWS_KEY, PRIVATE_KEY, PRIVATE_KEY_BODY, write

from kestrel.workspace.changes import Change, ChangeSet, Entry
from kestrel.workspace.verify.changed_text import (
    MAX_SCAN_BYTES,
    ChangedText,
    added_lines,
    from_change_set,
)
from kestrel.workspace.verify.failures import Finding, VerificationReport
from kestrel.workspace.verify.security import (
    GateReport,
    gate_change_set,
    gate_check,
    scan,
    security_gate,
)
from kestrel.workspace.verify.session import verification_event

HANDLER = '''"""Request handlers."""

import subprocess

import yaml


def handle(user_input: str, data: str, cursor: object, name: str) -> object:
{body}
'''
RISKY = {
    "aws-key": (f'AWS_ACCESS_KEY_ID = "{AWS_KEY}"\n', "detect-secrets", "AWS Access Key"),
    "private-key": (f'KEY = """{PRIVATE_KEY}"""\n', "secrets", "private-key"),
    "shell": (
        HANDLER.format(body="    return subprocess.run(user_input, shell=True)"),
        "bandit",
        "B602",
    ),
    "yaml-load": (HANDLER.format(body="    return yaml.load(data)"), "bandit", "B506"),
    "sql-percent": (
        HANDLER.format(
            body="    return cursor.execute(\"SELECT * FROM users WHERE name = '%s'\" % name)"
        ),
        "bandit",
        "B608",
    ),
    "sql-fstring": (
        HANDLER.format(
            body="    return cursor.execute(f\"DELETE FROM users WHERE name = '{name}'\")"
        ),
        "bandit",
        "B608",
    ),
    "eval": (HANDLER.format(body="    return eval(data)"), "bandit", "B307"),
}


def _change(path: str, base: str | bytes | None, new: str | bytes) -> Change:
    def entry(data: str | bytes | None) -> Entry | None:
        if data is None:
            return None
        return Entry("file", data.encode() if isinstance(data, str) else data)

    return Change(path=path, base=entry(base), new=entry(new))


def _gate(*changes: Change) -> GateReport:
    return gate_change_set(ChangeSet(tuple(changes)))


@pytest.mark.parametrize("case", sorted(RISKY))
def test_each_risky_addition_blocks(case: str) -> None:
    added, tool, code = RISKY[case]
    new = APP + "\n" + added if tool != "bandit" else added

    report = _gate(_change("app/settings.py", APP if tool != "bandit" else None, new))

    assert [(f.tool, f.code, f.kind) for f in report.blocking] == [(tool, code, "security")]
    [failure] = report.blocking
    assert failure.file == "app/settings.py" and failure.line is not None
    assert new.splitlines()[failure.line - 1].strip(), failure  # points at the added code


def test_no_finding_shows_a_secret_s_value() -> None:
    new = APP + f'\nAWS_ACCESS_KEY_ID = "{AWS_KEY}"\npassword = "correct-horse-battery"\n'
    new += f'KEY = """{PRIVATE_KEY}"""\n'

    report = _gate(_change("app/settings.py", APP, new))

    failures = [finding.failure for finding in report.findings]
    assert {f.code for f in failures} >= {"AWS Access Key", "private-key", "Secret Keyword"}
    shown = "\n".join(f.render() + "\n" + f.message for f in failures)
    for secret in (AWS_KEY, "correct-horse-battery", PRIVATE_KEY_BODY.splitlines()[0][:40]):
        assert secret not in shown
    assert "AKIA****" in shown  # masked, yet recognisable


def test_code_that_was_already_there_is_never_blamed() -> None:
    # The file held a key and a shell call before the session; the change adds a clean line.
    before = APP + f'\nOLD_KEY = "{AWS_KEY}"\n\n\ndef run(cmd):\n    import subprocess\n'
    before += "    return subprocess.run(cmd, shell=True)\n"
    after = before.replace('"eu-west-1")', '"eu-central-1")')

    report = _gate(_change("app/settings.py", before, after))

    assert report.findings == ()
    assert report.scanned == ("app/settings.py",)


def test_a_renamed_file_is_compared_with_where_it_came_from() -> None:
    before = APP + f'\nOLD_KEY = "{AWS_KEY}"\n'
    changes = (
        Change(path="app/old.py", base=Entry("file", before.encode()), new=None),
        Change(
            path="app/new.py",
            base=None,
            new=Entry("file", (before + "X = 1\n").encode()),
            old_path="app/old.py",
        ),
    )

    assert gate_change_set(ChangeSet(changes)).findings == ()


def test_comments_do_not_silence_the_gate() -> None:
    new = APP + f'\nKEY = "{AWS_KEY}"  # pragma: allowlist secret\n\n\n'
    new += "def go(cmd):\n    import subprocess\n    subprocess.run(cmd, shell=True)  # nosec\n"

    report = _gate(_change("app/settings.py", APP, new))

    assert {f.code for f in report.blocking} == {"AWS Access Key", "B602"}


def test_bad_input_never_breaks_the_gate() -> None:
    report = _gate(
        _change("data.bin", None, b"\x00\x01\x02" * 100),
        _change("latin.py", None, b"name = '\xe9t\xe9'\nKEY = '" + AWS_KEY.encode() + b"'\n"),
        _change("broken.py", None, "def (:\n    eval(x)\n"),
        _change("huge.txt", None, b"x" * (MAX_SCAN_BYTES + 1)),
        _change("empty.py", None, b""),
        Change(path="link", base=None, new=Entry("symlink", b"/etc/passwd")),
    )

    assert [f.code for f in report.blocking] == ["AWS Access Key"]
    assert report.blocking[0].file == "latin.py"
    assert sorted(s.split(":")[0] for s in report.skipped) == ["data.bin", "huge.txt"]


def test_the_gate_reads_changed_files_against_a_baseline(tmp_path: Path) -> None:
    write(tmp_path, {"app/settings.py": APP + f'KEY = "{AWS_KEY}"\n', "notes.md": "hi\n"})

    blamed = security_gate(tmp_path, ["app/settings.py", "gone.py"])
    known = security_gate(
        tmp_path,
        ["app/settings.py", "notes.md"],
        baseline=lambda paths: {"app/settings.py": (APP + f'KEY = "{AWS_KEY}"\n').encode()},
    )

    assert [f.code for f in blamed.blocking] == ["AWS Access Key"]
    assert known.findings == () and known.scanned == ()  # unchanged, and notes.md not changed


def test_a_symlink_is_not_followed(tmp_path: Path) -> None:
    write(tmp_path / "outside", {"id_rsa": PRIVATE_KEY + "\n"})
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "key.pem").symlink_to(tmp_path / "outside" / "id_rsa")

    assert security_gate(tmp_path / "project", ["key.pem"]).findings == ()


def test_as_a_verification_check() -> None:
    report = _gate(
        _change("a.py", None, f'K = "{AWS_KEY}"\nimport hashlib\nh = hashlib.md5(b"")\n')
    )

    check = gate_check(report)

    assert check is not None and check.status == "failed" and check.name == "security"
    assert [f.code for f in check.failures] == ["AWS Access Key", "B324"]  # blocking first
    assert gate_check(_gate()) is None
    clean = gate_check(_gate(_change("a.py", None, "X = 1\n")))
    assert clean is not None and clean.status == "passed"


@pytest.mark.parametrize(
    ("old", "new", "added"),
    [
        ([], ["a", "b"], {1, 2}),
        (["a", "b", "c"], ["a", "x", "c"], {2}),
        (["a", "b"], ["a", "b", "b"], {3}),
        (["x", "a", "b"], ["a", "b"], set()),
        (["a"] * 5, ["b"] + ["a"] * 5 + ["c"], {1, 7}),
    ],
)
def test_added_lines(old: list[str], new: list[str], added: set[int]) -> None:
    assert added_lines(old, new) == added


def test_a_scanner_that_breaks_blocks_the_apply_but_does_not_send_the_model_back() -> None:
    def broken(texts: object) -> list[Finding]:
        raise RuntimeError(f"choked on {AWS_KEY}")

    def seen(texts: Sequence[ChangedText]) -> list[Finding]:
        return []

    collected = from_change_set(ChangeSet((_change("a.py", None, "X = 1\n"),)))

    report = scan(collected, {"broken": broken, "fine": seen})

    [failure] = report.blocking
    assert failure.kind == "error" and "RuntimeError" in failure.message
    assert AWS_KEY not in failure.message
    check = gate_check(report)
    assert check is not None and check.status == "failed"
    event = verification_event(VerificationReport((check,)), ["a.py"])
    assert not event.ok and not event.blocking
