"""`kestrel sessions show ID --html`: the trajectory page of a real scripted session."""

from __future__ import annotations

from pathlib import Path

from report_kit import ScriptedSession


def test_html_page_goes_to_the_session_folder_by_default(session: ScriptedSession) -> None:
    done = session.env.run("sessions", "show", session.session_id[:8], "--html")
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    data_dir = Path(session.env.vars["KESTREL_DATA_DIR"])
    assert path == data_dir.resolve() / "artifacts" / session.session_id / "trajectory.html"
    page = path.read_text()
    assert f"Session {session.session_id}" in page
    assert "fix the failing tests" in page and "Fixed: add now adds." in page
    assert '<span class="add">+    return a + b</span>' in page
    assert "<script" not in page and "&lt;script&gt;alert(" in page


def test_html_page_goes_where_output_says(session: ScriptedSession, tmp_path: Path) -> None:
    target = tmp_path / "pages" / "fix.html"
    done = session.env.run(
        "sessions", "show", session.session_id, "--html", "--output", str(target)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target) and target.read_text().startswith("<!DOCTYPE html>")
    folder = session.env.run("sessions", "show", session.session_id, "--html", "-o", str(tmp_path))
    assert Path(folder.stdout.strip()) == tmp_path / f"{session.session_id}.html"


def test_html_errors_are_clear(session: ScriptedSession, tmp_path: Path) -> None:
    missing = session.env.run("sessions", "show", "zzzz", "--html")
    assert (
        missing.returncode == 2 and "zzzz" in missing.stderr and "Traceback" not in missing.stderr
    )
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    done = session.env.run(
        "sessions", "show", session.session_id, "--html", "-o", str(blocked / "x.html")
    )
    assert done.returncode == 2 and "cannot write the page" in done.stderr
    assert "Traceback" not in done.stderr and blocked.read_text() == "not a folder"
    alone = session.env.run("sessions", "show", session.session_id, "-o", str(tmp_path / "y"))
    assert alone.returncode == 2 and "--output goes with --html" in alone.stderr
