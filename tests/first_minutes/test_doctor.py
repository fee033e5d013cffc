"""`kestrel doctor` for a new user: every check a first run needs, a fix under each failure,
exit 1 only when something failed, and never a traceback (broken settings, unusable data folder)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from kit import NewUser, Result, assert_clean

EXPECTED = {
    "settings",
    "credentials",
    "sandbox",
    "git",
    "repository",
    "ripgrep",
    "data directory",
    "disk",
    "index",
}
SANDBOX_WORKS = shutil.which("bwrap") is not None


def checks(result: Result) -> list[dict[str, str | None]]:
    """The `--json` report's checks, after checking its shape and that it agrees with the code."""
    assert_clean(result)
    report = json.loads(result.out)
    assert set(report) == {"ok", "checks"}
    found: list[dict[str, str | None]] = report["checks"]
    failed = [c for c in found if c["status"] == "fail"]
    assert report["ok"] is (not failed)
    assert result.code == (0 if report["ok"] else 1)
    assert all(c["fix"] for c in failed), failed
    return found


def line(result: Result, start: str) -> str:
    """The one line of the report that begins (after its indent) with `start`."""
    (found,) = [x.strip() for x in result.out.splitlines() if x.strip().startswith(start)]
    return found


def test_a_new_user_without_a_key_is_told_to_set_it(user: NewUser) -> None:
    done = user.run("doctor")
    assert done.code == 1
    assert_clean(done)
    assert done.first_line() == f"kestrel doctor: what a run in {user.project} needs"
    user_file = user.home / ".config" / "kestrel" / "settings.toml"
    assert (
        line(done, "ok    settings:")
        == f"ok    settings: {user_file}: none yet; the defaults apply"
    )
    failure = line(done, "FAIL  credentials:")
    assert failure.startswith("FAIL  credentials: anthropic:claude-sonnet-4-5 (main, plan, fast")
    assert "ANTHROPIC_API_KEY" in failure
    lines = [x.strip() for x in done.out.splitlines()]
    assert lines[lines.index(failure) + 1].startswith("fix: export ANTHROPIC_API_KEY=")
    assert line(done, "ok    repository:") == f"ok    repository: {user.project}"
    assert line(done, "info  index:") == (
        f"info  index: {user.project}: not indexed yet; the first session builds it"
    )
    assert lines[-1].startswith("NOT ready: ")
    names = {c["name"] for c in checks(user.run("doctor", "--json"))}
    assert names >= EXPECTED


def test_with_a_key_and_a_sandbox_the_doctor_passes(user: NewUser) -> None:
    done = user.run("doctor", env={"ANTHROPIC_API_KEY": "sk-ant-test"})
    assert_clean(done)
    found = checks(user.run("doctor", "--json", env={"ANTHROPIC_API_KEY": "sk-ant-test"}))
    (credentials,) = [c for c in found if c["name"] == "credentials"]
    assert credentials["status"] == "ok"
    if SANDBOX_WORKS:
        assert done.code == 0, done.out
        assert done.out.splitlines()[-1].startswith("ready: nothing failed")
    else:
        (sandbox,) = [c for c in found if c["name"] == "sandbox" and c["status"] == "fail"]
        assert "bubblewrap" in str(sandbox["fix"])


def test_model_checks_a_chosen_model_instead(user: NewUser) -> None:
    script = user.project / "script.json"
    script.write_text("[]")
    done = user.run("doctor", "--model", f"scripted:{script}")
    assert_clean(done)
    assert line(done, "ok    credentials:").startswith(
        f"ok    credentials: scripted:{script} (chosen)"
    )
    assert "anthropic" not in done.out
    bad = user.run("doctor", "--model", "nonsense")
    assert bad.code == 1
    assert_clean(bad)
    assert line(bad, "FAIL  settings:").startswith("FAIL  settings: --model: ")
    assert line(bad, "warn  credentials:").endswith(
        "not checked: the settings have problems (above)"
    )


def test_a_broken_settings_file_shows_every_problem_and_no_traceback(user: NewUser) -> None:
    settings = user.home / ".config" / "kestrel" / "settings.toml"
    settings.parent.mkdir(parents=True)
    settings.write_text('modle = "x"\n[limits]\nmax_turns = 0\n')
    done = user.run("doctor")
    assert done.code == 1
    assert_clean(done)
    lines = [x.strip() for x in done.out.splitlines()]
    first = lines.index(
        f"FAIL  settings: {settings}: limits.max_turns: Input should be greater than 0 (got 0)"
    )
    assert lines[first + 1] == f'{settings}: modle: unknown setting; did you mean "model"?'
    assert lines[first + 2] == f"fix: edit {settings} (2 problems)"
    # A run says the same two lines and stops before doing anything.
    run = user.run("-p", "fix it")
    assert run.code == 2
    assert_clean(run)
    assert run.err.splitlines() == [
        f"kestrel: {settings}: limits.max_turns: Input should be greater than 0 (got 0)",
        f'{settings}: modle: unknown setting; did you mean "model"?',
    ]


def test_an_unusable_data_directory_fails_with_a_fix(user: NewUser, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    data = blocker / "kestrel"
    done = user.run("doctor", env={"KESTREL_DATA_DIR": str(data)})
    assert done.code == 1
    assert_clean(done)
    assert line(done, "FAIL  data directory:") == (
        f"FAIL  data directory: {data}: {blocker} is a file, not a folder"
    )
    listed = user.run("sessions", "list", env={"KESTREL_DATA_DIR": str(data)})
    assert listed.code == 2
    assert_clean(listed)
    assert listed.first_line("err").startswith(f"kestrel: cannot open the sessions in {data}: ")


def test_the_index_check_says_how_stale_the_index_is(user: NewUser) -> None:
    assert user.run("index").code == 0
    fresh = user.run("doctor")
    assert line(fresh, "ok    index:") == (
        f"ok    index: {user.project}: 1 file, updated just now; up to date"
    )
    # Three hours later, by the files' times; reading the index does not make it newer.
    (folder,) = (user.home / ".cache" / "kestrel" / "index").iterdir()
    then = time.time() - 3 * 3600
    for file in folder.iterdir():
        os.utime(file, (then, then))
    for _ in range(2):
        assert line(user.run("doctor"), "ok    index:") == (
            f"ok    index: {user.project}: 1 file, updated 3 hours ago; up to date"
        )
    (user.project / "calc.py").write_text("def add(a, b):\n    return a + b\n\n# fixed\n")
    stale = user.run("doctor")
    assert line(stale, "info  index:") == (
        f"info  index: {user.project}: 1 file, updated 3 hours ago; 1 changed or removed since "
        "(sessions refresh it as they start)"
    )


def test_outside_a_repository_the_doctor_warns(user: NewUser, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    done = user.run("doctor", "--json", cwd=loose)
    (repository,) = [c for c in checks(done) if c["name"] == "repository"]
    assert repository["status"] == "warn"
    assert repository["detail"] == (
        f"{loose} is not in a git repository; Kestrel treats this folder as the project"
    )


def test_doctor_reaches_a_model_at_the_endpoint_given_by_flag(user: NewUser) -> None:
    bad = user.run("doctor", "--model", "openai:local", "--base-url", "ftp://nowhere")
    assert bad.code == 1
    assert any(
        line.strip() == "FAIL  settings: --base-url: expected an http:// or https:// URL "
        '(got "ftp://nowhere")'
        for line in bad.out.splitlines()
    ), bad.out
    assert_clean(bad)
