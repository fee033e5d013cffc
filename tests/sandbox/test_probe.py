"""probe() and `kestrel doctor` on this machine, and with bubblewrap missing."""

from __future__ import annotations

import os
import shutil

import pytest
import typer
from typer.testing import CliRunner

from kestrel.cli.doctor_cmd import doctor_command
from kestrel.cli.sandbox_cmd import render_report, sandbox_app
from kestrel.sandbox.probe import INSTALL_HINT, probe


def cli() -> typer.Typer:
    app = typer.Typer()
    app.command("doctor")(doctor_command)
    app.add_typer(sandbox_app, name="sandbox")
    return app


def needs_bwrap() -> None:
    if shutil.which("bwrap") is None:
        if os.environ.get("CI"):
            pytest.fail("bubblewrap is not installed, and CI must check the sandbox")
        pytest.skip("bubblewrap is not installed")


async def test_the_probe_starts_a_real_sandbox() -> None:
    needs_bwrap()
    report = await probe()
    assert report.ok, report
    assert report.userns and report.seccomp and report.bwrap_version
    assert render_report(report).endswith("sandbox: ready")


async def test_a_missing_bubblewrap_is_explained(tmp_path) -> None:
    report = await probe(bwrap=str(tmp_path / "no-bwrap"))
    text = render_report(report)
    assert report.bwrap_path is None and not report.ok
    assert f"fix: {INSTALL_HINT}" in text and text.endswith("sandbox: NOT ready")


def test_doctor_and_sandbox_run_on_the_command_line(tmp_path) -> None:
    needs_bwrap()
    runner = CliRunner()
    # A scripted model needs no key: only the machine's own checks can fail here.
    doctor = runner.invoke(cli(), ["doctor", "--model", "scripted:none.json"])
    assert doctor.exit_code == 0, doctor.output
    assert "only listed hosts, through a proxy" in doctor.output
    ran = runner.invoke(
        cli(), ["sandbox", "run", "--workspace", str(tmp_path), "--", "echo hi > f; exit 4"]
    )
    assert ran.exit_code == 4 and (tmp_path / "f").read_text() == "hi\n"
    slow = runner.invoke(
        cli(), ["sandbox", "run", "--workspace", str(tmp_path), "--timeout", "0.5", "sleep", "5"]
    )
    assert slow.exit_code == 124
