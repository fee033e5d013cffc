"""Later checkpoints in a kernel overlay look only at the upper layer, and record exactly what a
full walk of the worktree records.

Each step changes the merged view (files, ignored files, deleted and re-made directories, type
changes, symbolic links, renames, nested repositories, rewinds), then takes a checkpoint with
the upper-layer store and, on a second shadow repository, with a store that walks everything:
the two trees must be the same. Entering the namespace changes the whole process, so the steps
run in a child Python process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CHILD = textwrap.dedent(
    """
    import json, os, random, shutil, subprocess, sys
    from pathlib import Path
    from kestrel.workspace.overlay import layer_for, open_view, prepare_namespace
    reason = prepare_namespace()
    if reason is not None:
        print(json.dumps({"unavailable": reason}))
        sys.exit(0)
    from kestrel.workspace import CheckpointStore, shadow_git
    from kestrel.workspace.upper_index import OverlayLayers

    checkout, data, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    ran = []
    original = shadow_git.ShadowGit.run
    failed = []
    def run(self, *args, **kwargs):
        ran.append(args[0])
        done = original(self, *args, **kwargs)
        if args[0] == "update-index" and done.returncode:
            failed.append(done.stderr)
        return done
    shadow_git.ShadowGit.run = run

    layer = layer_for(data, "s1")
    view = open_view(checkout, layer, kernel=True)
    if view.kind != "kernel":
        print(json.dumps({"unavailable": "no kernel overlay"}))
        sys.exit(0)
    root = view.root
    layers = OverlayLayers(upper=layer.upper, lower=layer.lower)
    fast = CheckpointStore(root, data / "fast", session="s1", layers=layers)
    full = CheckpointStore(root, data / "full", session="s1")
    rng = random.Random(seed)
    made = []

    def clear_parents(rel):
        for parent in reversed((root / rel).relative_to(root).parents[:-1]):
            if (root / parent).is_symlink() or (root / parent).is_file():
                (root / parent).unlink()

    def write(rel, text):
        path = root / rel
        clear_parents(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        path.write_text(text)
        made.append(rel)

    def files():
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                      if p.is_file() and ".git" not in p.relative_to(root).parts)

    def remove(rel):
        path = root / rel
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)

    def empty_folder(rel):
        clear_parents(rel)
        remove(rel)
        (root / rel).mkdir(parents=True, exist_ok=True)

    def link(rel):
        if os.path.lexists(root / rel):
            remove(rel)
        else:
            os.symlink("pkg", root / rel)

    OPS = [
        lambda: write(rng.choice(files()), f"changed {rng.random()}\\n"),
        lambda: write(f"new/n{rng.randrange(5)}.txt", "new\\n"),
        lambda: write(f"pkg/tmp{rng.randrange(3)}.log", "ignored\\n"),
        lambda: remove(rng.choice(files())),
        lambda: remove(rng.choice(made)) if made else None,
        lambda: remove(rng.choice(["pkg", "docs", "new", "pkg/sub"])),
        lambda: write("docs/guide/intro.md", "made again\\n"),
        lambda: write("pkg/mod.py/inner.py", "a file became a folder\\n"),
        lambda: write("docs", "a folder became a file\\n"),
        lambda: link(f"link{rng.randrange(3)}"),
        lambda: empty_folder(rng.choice(files())),  # a file becomes an empty folder
        lambda: empty_folder(rng.choice(made)) if made else None,
        lambda: subprocess.run(["mv", str(root / "pkg"), str(root / "moved")], check=False,
                               capture_output=True),
    ]
    LATE = [
        lambda: subprocess.run(["git", "init", "-q", str(root / "nested")], check=False),
    ]
    points = []
    mismatches = []
    for step in range(int(sys.argv[4])):
        if step and rng.random() < 0.08 and points:
            target = rng.choice(points)
            fast.restore(target[0])
            full.restore(target[1])
        else:
            # A nested repository sends every later checkpoint back to the full walk.
            rng.choice(OPS + LATE if step > 32 else OPS)()
        a = fast.snapshot(f"step {step}")
        b = full.snapshot(f"step {step}")
        tree_a = fast.list()[-1].tree
        tree_b = full.list()[-1].tree
        if tree_a != tree_b:
            mismatches.append(step)
        points.append((fast.list()[-1].id, full.list()[-1].id))
    view.close()
    print(json.dumps({"mismatches": mismatches, "update_index": ran.count("update-index"),
                      "add": ran.count("add"), "failed": failed}))
    """
)


def _project(root: Path) -> None:
    files = {
        "README.md": "readme\n",
        ".gitignore": "*.log\n__pycache__/\n",
        "pkg/__init__.py": "",
        "pkg/mod.py": "x = 1\n",
        "pkg/sub/deep.py": "y = 2\n",
        "docs/index.md": "docs\n",
        "docs/guide/intro.md": "intro\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=root, check=True)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_upper_layer_checkpoints_match_a_full_walk(tmp_path: Path, seed: int) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _project(checkout)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(checkout), str(tmp_path / "data"), str(seed), "40"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "unavailable" in result:
        pytest.skip(f"no kernel overlay here: {result['unavailable']}")
    assert result["mismatches"] == []
    # Most checkpoints took the upper-layer path; a nested repository or a rewind walks.
    assert result["update_index"] >= 20, result
