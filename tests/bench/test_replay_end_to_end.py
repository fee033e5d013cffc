"""The replay harness end to end: synthetic trajectories, a local mirror, the real `kestrel` in
its bubblewrap sandbox, then the classifier over what it wrote."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from classify import load_results
from classify_rules import classify
from run import main

from kestrel.sandbox.probe import probe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "replay"
IDS = ("demo__demo-1", "demo__demo-2")


@pytest.fixture(scope="module")
def sandbox_ready() -> None:
    """Skip where bubblewrap is missing or cannot start a sandbox here; in CI, fail instead."""
    why = ""
    if shutil.which("bwrap") is None:
        why = "bubblewrap is not installed"
    else:
        report = asyncio.run(probe())
        if not report.ok:
            why = f"the sandbox cannot start here: {'; '.join(report.fixes())}"
    if why and os.environ.get("CI"):
        pytest.fail(f"{why}, and CI must run the replay test")
    if why:
        pytest.skip(why)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _mirror(tmp: Path) -> tuple[Path, str]:
    """A bare mirror of a two-file project, laid out as <root>/local+demo/repo; its commit."""
    src = tmp / "src"
    src.mkdir()
    (src / "hello.py").write_text("def greet():\n    return 'helo'\n")
    (src / "setup.cfg").write_text("[metadata]\n")
    _git(src, "init", "-q")
    _git(src, "add", "-A")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "base")
    root = tmp / "mirrors"
    _git(tmp, "clone", "-q", "--bare", str(src), str(root / "local+demo" / "repo"))
    return root, _git(src, "rev-parse", "HEAD")


def _trajectories(tmp: Path, workdir: Path) -> Path:
    """The fixtures with their commands pointed at this test's work dir, as the results tree
    lays them out (trajs/<id>/<id>.traj.json, logs/<id>/report.json)."""
    root = tmp / "trajs"
    for iid in IDS:
        text = (FIXTURES / f"{iid}.traj.json").read_text().replace("@WORKDIR@", str(workdir))
        (root / "trajs" / iid).mkdir(parents=True)
        (root / "trajs" / iid / f"{iid}.traj.json").write_text(text)
        (root / "logs" / iid).mkdir(parents=True)
        (root / "logs" / iid / "report.json").write_text(json.dumps({iid: {"resolved": True}}))
    return root


@pytest.mark.usefixtures("sandbox_ready")
def test_replay_reproduces_one_run_and_explains_the_other(tmp_path: Path) -> None:
    mirrors, base = _mirror(tmp_path)
    workdir = tmp_path / "testbed"
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({iid: ["local/demo", base] for iid in IDS}))
    out, runs = tmp_path / "results.jsonl", tmp_path / "runs"
    args = ["--ids", *IDS, "--instances", str(instances), "--mirror-root", str(mirrors)]
    args += ["--trajs", str(_trajectories(tmp_path, workdir)), "--workdir", str(workdir)]
    args += ["--out", str(out), "--runs-dir", str(runs)]
    args += ["--kestrel", str(Path(sys.executable).parent / "kestrel"), "--timeout", "300"]
    assert main(args) == 0

    rows = {r["instance_id"]: r for r in load_results(out)}
    first, second = rows["demo__demo-1"], rows["demo__demo-2"]
    assert first["status"] == "identical", first
    assert (first["finish"]["reason"], first["steps_ran"], first["n_steps"]) == ("done", 2, 2)
    assert first["format_errors"] == 2 and first["orig_resolved"] is True
    for name in ("script.json", "meta.json", "events.jsonl", "replay.diff", "stderr.txt"):
        assert (runs / "demo__demo-1" / name).is_file(), name
    assert "+    return 'hello'" in (runs / "demo__demo-1" / "replay.diff").read_text()

    # demo-2: its generator needs a package this machine lacks, so data.txt is never written;
    # setup.cfg was changed by the original environment, and no command touches it.
    assert second["status"] == "mismatch", second
    assert sorted(second["mismatch_paths"]) == [["D", "data.txt"], ["M", "setup.cfg"]]
    assert second["env_preexisting_paths"] == ["setup.cfg"]
    # The generator's failure shows in its output only: the command's exit code is echo's.
    assert [(d["step"], d["why"]) for d in second["diverged_steps"]] == [(1, "output")]
    assert "data.txt" in (runs / "demo__demo-2" / "mismatch.diff").read_text()
    verdicts = {iid: classify(r) for iid, r in rows.items()}
    assert verdicts["demo__demo-1"].cls == "identical"
    assert verdicts["demo__demo-2"].cls == "environment", verdicts["demo__demo-2"].evidence
    why_data, why_cfg = verdicts["demo__demo-2"].evidence
    assert why_data.startswith("data.txt: step 1 `cd ")
    assert "No module named 'demo_missing_dependency'" in why_data
    assert why_cfg == "setup.cfg: changed before the original run; no command touches it"


def test_a_work_dir_that_is_not_a_checkout_is_never_deleted(tmp_path: Path) -> None:
    mirrors, base = _mirror(tmp_path)
    workdir = tmp_path / "precious"
    workdir.mkdir()
    (workdir / "notes.txt").write_text("keep me")
    instances = tmp_path / "instances.json"
    instances.write_text(json.dumps({"demo__demo-1": ["local/demo", base]}))
    out = tmp_path / "results.jsonl"
    args = ["--ids", "demo__demo-1", "--instances", str(instances), "--mirror-root", str(mirrors)]
    args += ["--trajs", str(_trajectories(tmp_path, workdir)), "--workdir", str(workdir)]
    args += ["--out", str(out), "--runs-dir", str(tmp_path / "runs")]
    assert main(args) == 0
    (row,) = load_results(out)
    assert row["status"] == "harness_error"
    assert "not empty and not a git checkout" in row["error"]
    assert (workdir / "notes.txt").read_text() == "keep me"
    assert main([*args, "--resume"]) == 0  # the id has its line: nothing runs again
    assert len(out.read_text().splitlines()) == 1


def test_bad_arguments_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--ids", "x", "--instances", str(tmp_path / "none.json"), "--trajs", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("run.py: cannot read the instances file") and err.count("\n") == 1
    args = ["--ids", "x", "--instances", str(tmp_path), "--trajs", str(tmp_path)]
    assert main([*args, "--mirror-override", "django"]) == 2
    assert "owner/name=GIT_DIR" in capsys.readouterr().err
