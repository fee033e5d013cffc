"""`kestrel trust`, through the real command: a hostile repository's hook never runs untrusted."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from cli_kit import Env


def hostile(env: Env) -> tuple[Path, Path]:
    """A repository whose settings file runs a command on the host when a session starts."""
    marker = env.project.parent / "MARKER"
    settings = env.project / ".kestrel" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text(
        f"[[hooks.SessionStart]]\nhooks = [{{ command = {json.dumps(f'touch {marker}')} }}]\n"
    )
    return settings, marker


def test_an_untrusted_hook_never_runs_and_a_trusted_one_does(env: Env) -> None:
    settings, marker = hostile(env)
    refused = env.run(*env.headless())
    assert refused.returncode == 2
    first = refused.stderr.strip().splitlines()[0]
    assert str(settings) in first and "hooks.SessionStart" in first and "kestrel trust" in first
    assert "Traceback" not in refused.stderr
    assert not marker.exists()
    assert "return a - b" in (env.project / "calc.py").read_text()  # Nothing ran at all.

    trusted = env.run("trust")
    assert trusted.returncode == 0, trusted.stderr
    assert f"{settings} (sha256 " in trusted.stdout
    assert f'hooks.SessionStart = "touch {marker}"' in trusted.stdout
    store = env.project.parent / "home" / ".config" / "kestrel" / "trusted.json"
    assert stat.S_IMODE(store.stat().st_mode) == 0o600

    done = env.run(*env.headless())
    assert done.returncode == 0, done.stderr
    assert marker.exists()  # The same hook, once trusted, runs: the refusal above was real.


def test_an_edit_after_trust_is_refused_again_and_revoke_forgets(env: Env) -> None:
    settings, marker = hostile(env)
    assert env.run("trust").returncode == 0
    settings.write_text('sandbox = "none"\n' + settings.read_text())
    listed = env.run("trust", "--list")
    assert listed.returncode == 0 and "changed since trusted" in listed.stdout
    refused = env.run(*env.headless())
    assert refused.returncode == 2 and "changed since you trusted it" in refused.stderr
    assert "sandbox" in refused.stderr.splitlines()[0]
    assert not marker.exists()

    assert env.run("trust").returncode == 0
    assert "  trusted" in env.run("trust", "--list").stdout
    revoked = env.run("trust", "--revoke")
    assert revoked.returncode == 0 and str(settings) in revoked.stdout
    assert env.run("trust", "--revoke").returncode == 1
    assert env.run(*env.headless()).returncode == 2
    assert not marker.exists()


def test_a_harmless_file_needs_no_trust(env: Env) -> None:
    settings = env.project / ".kestrel" / "settings.toml"
    settings.parent.mkdir()
    settings.write_text("[limits]\nmax_turns = 20\n")
    done = env.run(*env.headless())
    assert done.returncode == 0, done.stderr
    told = env.run("trust")
    assert told.returncode == 0 and "sets nothing that needs trust" in told.stdout


def test_trust_errors_are_one_line(env: Env) -> None:
    none_here = env.run("trust")
    assert none_here.returncode == 1 and "no .kestrel/settings.toml" in none_here.stderr
    hostile(env)
    store = env.project.parent / "home" / ".config" / "kestrel" / "trusted.json"
    store.write_text("{broken")
    for args in (["trust"], ["trust", "--list"], list(env.headless())):
        done = env.run(*args)
        assert done.returncode == 2, args
        assert done.stderr.strip().startswith(f"kestrel: {store}: corrupt trust store"), args
        assert "Traceback" not in done.stderr
    bad_toml = env.project / ".kestrel" / "settings.local.toml"
    bad_toml.write_text("hooks = [")
    done = env.run("trust")
    assert done.returncode == 2 and f"{bad_toml}: invalid TOML" in done.stderr


def test_doctor_reports_an_untrusted_file(env: Env) -> None:
    settings, _ = hostile(env)
    done = env.run("doctor")
    line = next(x for x in done.stdout.splitlines() if f"settings: {settings}" in x)
    assert "FAIL" in line and str(settings) in line and "kestrel trust" in line
