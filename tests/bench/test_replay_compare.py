"""run.compare and replay_git on a real git checkout: text and binary files, generated files,
files the original environment changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import replay_git as rg
from convert import Conversion, Step
from run import compare


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout


def _checkout(tmp: Path) -> tuple[Path, str]:
    """A mirror holding one commit, checked out by the harness; the commit."""
    src = tmp / "src"
    src.mkdir()
    (src / "a.py").write_text("x = 1\n")
    (src / "tox.ini").write_text("[tox]\n")
    _git(src, "init", "-q")
    _git(src, "add", "-A")
    _git(src, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "base")
    base = _git(src, "rev-parse", "HEAD").strip()
    workdir = tmp / "testbed"
    rg.prepare_checkout(src / ".git", base, workdir)
    return workdir, base


def _recorded(workdir: Path) -> str:
    """The patch the original run submitted: a text change, a new binary file, a generated
    file and a change to tox.ini that no command makes; the checkout is reset afterwards."""
    (workdir / "a.py").write_text("x = 2\n")
    (workdir / "blob.bin").write_bytes(b"\x00\x01binary\x00")
    (workdir / "__pycache__").mkdir()
    (workdir / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\x00pyc")
    (workdir / "tox.ini").write_text("[tox]\nrequires = pinned\n")
    _git(workdir, "add", "-A")
    patch = _git(workdir, "diff", "--cached")
    _git(workdir, "reset", "-q", "--hard")
    _git(workdir, "clean", "-qfdx")
    return patch


def _conversion(submission: str, *commands: str) -> Conversion:
    steps = [Step(i, c, 0, "", "") for i, c in enumerate(commands)]
    return Conversion(instance_id="x", task="t", steps=steps, submission=submission)


def test_the_same_change_is_identical_whatever_the_generated_files(tmp_path: Path) -> None:
    workdir, base = _checkout(tmp_path)
    patch = _recorded(workdir)
    assert "Binary files /dev/null and b/blob.bin differ" in patch
    (workdir / "a.py").write_text("x = 2\n")
    (workdir / "blob.bin").write_bytes(b"\x00\x01binary\x00")
    (workdir / "tox.ini").write_text("[tox]\nrequires = pinned\n")
    (workdir / "build").mkdir()
    (workdir / "build" / "out.o").write_bytes(b"obj")
    found = compare(workdir, base, _conversion(patch, "sed -i s/1/2/ a.py", "python gen.py"))
    assert found["status"] == "identical", found
    assert found["orig_paths"] == ["a.py", "blob.bin", "tox.ini"]


def test_differences_are_listed_with_what_may_explain_them(tmp_path: Path) -> None:
    workdir, base = _checkout(tmp_path)
    patch = _recorded(workdir)
    (workdir / "a.py").write_text("x = 3\n")
    (workdir / "blob.bin").write_bytes(b"\x00other\x00")
    commands = (
        "sed -i s/1/3/ a.py",
        "cat > gen.py <<'EOF'\nopen('blob.bin','wb')\nEOF",
        "python gen.py",
    )
    found = compare(workdir, base, _conversion(patch, *commands))
    assert found["status"] == "mismatch"
    assert found["mismatch_paths"] == [["M", "a.py"], ["M", "tox.ini"], ["B", "blob.bin"]]
    assert found["env_preexisting_paths"] == ["tox.ini"]
    assert found["path_producers"] == {"a.py": [0], "blob.bin": [1, 2]}
    assert "-x = 2\n+x = 3" in found["mismatch_diff"]
    assert "+x = 3" in found["replay_diff"]


def test_a_diff_over_a_blob_the_mirror_lacks_lists_the_files_instead(tmp_path: Path) -> None:
    """A partial mirror may lack a blob that differs: the diff names the file, it does not fail."""
    repo = tmp_path / "r"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "gone.txt").write_text("old\n")
    _git(repo, "add", "-A")
    old = _git(repo, "write-tree").strip()
    blob = _git(repo, "rev-parse", f"{old}:gone.txt").strip()
    (repo / "gone.txt").write_text("new\n")
    _git(repo, "add", "-A")
    new = _git(repo, "write-tree").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    text = rg.diff(repo, old, new)
    assert text.startswith("# no full diff") and "M\tgone.txt" in text
