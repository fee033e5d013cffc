"""Replay recorded mini-swe-agent trajectories through Kestrel and compare the final trees.

For each instance id: convert its trajectory (convert.py), check out the base commit from a local
mirror into the work dir, run the installed `kestrel` with the scripted model in bypass mode (the
sandbox as by default, no --max-turns: Kestrel's default must be enough), then compare the tree
left behind with base + the recorded patch, ignoring generated files. One JSON line per id goes to
--out; runs/<id>/ keeps script.json, meta.json, events.jsonl, replay.diff, mismatch.diff and
stderr.txt. Classify the lines with classify.py. One replay at a time: the recorded commands use
the work dir's absolute path (/testbed). See bench/replay/README.md.

    python bench/replay/run.py --ids-file bench/replay/dev_ids.txt \
        --instances bench/replay/instances_dev.json --trajs TRAJ_GIT_DIR \
        --mirror-root MIRRORS [--mirror-override owner/name=GIT_DIR] [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import replay_git as rg
from classify_rules import mark_own_scripts, output_differs, producers
from convert import Conversion, convert
from replay_data import (
    DataError,
    Instance,
    load_instances,
    load_trajectory,
    mirror_for,
    parse_overrides,
    read_ids,
)
from replay_events import diverged_steps, steps_ran, summarize

_NOT_FOUND = re.compile(r"([\w.+-]+): (?:command )?not found")


@dataclass(frozen=True, slots=True)
class Options:
    """Where the inputs are and how to run Kestrel."""

    trajs: Path
    trajs_rev: str
    mirror_root: Path | None
    overrides: dict[str, Path]
    kestrel: str
    workdir: Path
    runs_dir: Path
    timeout: float


def kestrel_env(runs_dir: Path) -> dict[str, str]:
    """The caller's environment without its Kestrel settings: a data dir and an empty user
    config of the run's own, so personal settings do not change the replay."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KESTREL_")}
    (runs_dir / "_config").mkdir(parents=True, exist_ok=True)
    env.update(
        KESTREL_DATA_DIR=str(runs_dir / "_kestrel_data"),
        XDG_CONFIG_HOME=str(runs_dir / "_config"),
    )
    return env


def run_kestrel(opts: Options, task: str, script: Path) -> tuple[int | str, bytes, bytes]:
    """Kestrel's exit code (or 'timeout'), stdout and stderr as bytes (a stream that is not
    UTF-8 is itself a finding). On a timeout its whole process group is killed, so no command of
    the replay outlives it."""
    cmd = [opts.kestrel, "-p", task, "--model", f"scripted:{script}"]
    cmd += ["--permission-mode", "bypass", "--output-format", "stream-json"]
    cmd += ["--cwd", str(opts.workdir), "--workspace", "direct"]
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=kestrel_env(opts.runs_dir),
        cwd=opts.workdir,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return "timeout", out, err
    return proc.returncode, out, err


def _text(data: bytes) -> tuple[str, bool]:
    """The bytes as text, and whether they were valid UTF-8 (bad bytes become U+FFFD)."""
    try:
        return data.decode("utf-8"), True
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), False


def _host_programs(diverged: list[dict[str, Any]]) -> None:
    """Mark 'command not found' steps whose program this machine has (the sandbox hid it)."""
    for d in diverged:
        names = _NOT_FOUND.findall(f"{d['head']}\n{d['tail']}")
        if names:
            d["host_has_program"] = any(shutil.which(n) for n in names)


def compare(workdir: Path, base: str, conv: Conversion) -> dict[str, Any]:
    """Where the replay's tree differs from base + the recorded patch, and what may explain it."""
    patches = [p for p in rg.split_patch(conv.submission) if not rg.GENERATED.search(p.path)]
    missing = set(rg.missing_blob_paths(workdir))
    out: dict[str, Any] = {
        "orig_paths": [p.path for p in patches],
        "base_mismatch_paths": rg.base_mismatches(workdir, base, patches),
        "missing_blob_paths": sorted(missing)[:50],
    }
    try:
        expected = rg.expected_tree(workdir, base, patches)
    except rg.GitError as e:
        return {**out, "status": "expected_patch_does_not_apply", "error": str(e)}
    actual = rg.worktree_tree(workdir, base)
    binary = {p.path for p in patches if p.binary}
    rows = [(s, p) for s, p in rg.changed_paths(workdir, expected, actual) if p not in binary]
    rows += [("B", p) for p in rg.binary_mismatches(workdir, actual, patches)]
    rows = [(s, p) for s, p in rows if not rg.GENERATED.search(p) and p not in missing]
    commands = [s.command for s in conv.steps]
    joined = "\n".join(commands)
    untouched = [
        p for _, p in rows if rg.blob_at(workdir, base, p) == rg.blob_at(workdir, actual, p)
    ]
    pre = [p for p in untouched if os.path.basename(p) not in joined]
    out.update(
        status="mismatch" if rows else "identical",
        mismatch_paths=[list(r) for r in rows[:50]],
        env_preexisting_paths=pre,
        path_producers={p: producers(p, commands) for _, p in rows[:50] if p not in pre},
        replay_diff=rg.diff(workdir, base, actual),
        mismatch_diff=rg.diff(workdir, expected, actual, [p for _, p in rows[:20]]) if rows else "",
    )
    return out


def run_one(iid: str, inst: Instance, opts: Options) -> dict[str, Any]:
    """Replay one instance; its result line."""
    res: dict[str, Any] = {"instance_id": iid, "repo": inst.repo, "base_commit": inst.base_commit}
    traj, res["orig_resolved"] = load_trajectory(opts.trajs, iid, opts.trajs_rev)
    conv = convert(traj)
    run_dir = opts.runs_dir / iid
    run_dir.mkdir(parents=True, exist_ok=True)
    script = run_dir / "script.json"
    script.write_text(json.dumps(conv.script, indent=1))
    meta = conv.meta()
    (run_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    res.update(n_steps=len(conv.steps), turns_needed=len(conv.script))
    res.update(format_errors=conv.format_errors, submitted=conv.submitted)
    git_dir = mirror_for(inst.repo, opts.mirror_root, opts.overrides)
    if not rg.has_commit(git_dir, inst.base_commit):
        return {**res, "status": "no_base_commit", "error": f"{git_dir} lacks the base commit"}
    rg.prepare_checkout(git_dir, inst.base_commit, opts.workdir)
    started = time.monotonic()
    rc, out_bytes, err_bytes = run_kestrel(opts, conv.task or iid, script)
    res.update(kestrel_rc=rc, kestrel_wall_s=round(time.monotonic() - started, 2))
    (run_dir / "events.jsonl").write_bytes(out_bytes)
    (run_dir / "stderr.txt").write_bytes(err_bytes)
    stdout, res["stdout_utf8"] = _text(out_bytes)
    summary = summarize(stdout)
    diverged = diverged_steps(meta["steps"], summary, output_differs)
    _host_programs(diverged)
    mark_own_scripts(diverged, [s.command for s in conv.steps])
    res.update(
        finish=summary.finish,
        loop=summary.loop,
        verify=summary.verify,
        denied=summary.denied,
        errors=summary.errors,
        n_checkpoints=summary.n_checkpoints,
        session_s=summary.session_s,
        steps_ran=steps_ran(meta["steps"], summary),
        rc_diverged=sum(1 for d in diverged if d["why"] == "exit code"),
        output_diverged=sum(1 for d in diverged if d["why"] == "output"),
        diverged_steps=diverged,
    )
    found = compare(opts.workdir, inst.base_commit, conv)
    (run_dir / "replay.diff").write_text(found.pop("replay_diff", ""))
    (run_dir / "mismatch.diff").write_text(found.pop("mismatch_diff", ""))
    return {**res, **found}


def _progress(n: int, total: int, res: dict[str, Any]) -> str:
    finish = (res.get("finish") or {}).get("reason")
    return (
        f"[{n}/{total}] {res['instance_id']}: {res.get('status')} finish={finish} "
        f"ran={res.get('steps_ran')}/{res.get('n_steps')} "
        f"diverged={res.get('rc_diverged')}+{res.get('output_diverged')} "
        f"{res.get('total_s')}s"
    )


def _default_kestrel() -> str:
    """The `kestrel` installed beside this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "kestrel"
    return str(beside) if beside.exists() else "kestrel"


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, Options]:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--ids", nargs="*", default=[])
    ap.add_argument("--ids-file", type=Path)
    ap.add_argument("--instances", type=Path, required=True)
    ap.add_argument("--trajs", type=Path, required=True, help="trajectories: git dir or folder")
    ap.add_argument("--trajs-rev", default="HEAD", help="the commit to read from a git dir")
    ap.add_argument("--mirror-root", type=Path, help="holds <owner>+<name>/repo git dirs")
    ap.add_argument("--mirror-override", action="append", default=[], help="owner/name=GIT_DIR")
    ap.add_argument("--kestrel", default=_default_kestrel(), help="the kestrel command to run")
    ap.add_argument("--out", type=Path, default=Path("results.jsonl"))
    ap.add_argument("--workdir", type=Path, default=Path("/testbed"))
    ap.add_argument("--runs-dir", type=Path, default=Path("replay-runs"))
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per instance")
    ap.add_argument("--resume", action="store_true", help="skip ids --out already holds")
    ap.add_argument("--jobs", type=int, default=1, help="only 1: there is one work dir")
    a = ap.parse_args(argv)
    if a.jobs != 1:
        ap.error("--jobs must be 1: every replay uses the same work dir")
    opts = Options(
        trajs=a.trajs,
        trajs_rev=a.trajs_rev,
        mirror_root=a.mirror_root,
        overrides=parse_overrides(a.mirror_override),
        kestrel=a.kestrel,
        workdir=a.workdir.absolute(),
        runs_dir=a.runs_dir.absolute(),
        timeout=a.timeout,
    )
    return a, opts


def _done_ids(out: Path) -> set[str]:
    """Ids that already have a result line in `out` (a torn last line does not count)."""
    done = set()
    lines = out.read_text().splitlines() if out.is_file() else []
    for line in lines:
        try:
            done.add(str(json.loads(line)["instance_id"]))
        except (ValueError, KeyError, TypeError):
            continue
    return done


def main(argv: list[str] | None = None) -> int:
    """Replay every id given, appending one line per id to --out."""
    try:
        a, opts = _parse(argv)
        ids = read_ids(a.ids, a.ids_file)
        instances = load_instances(a.instances)
    except DataError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    if a.resume:
        ids = [i for i in ids if i not in _done_ids(a.out)]
    for n, iid in enumerate(ids, 1):
        started = time.monotonic()
        if iid not in instances:
            res: dict[str, Any] = {"instance_id": iid, "status": "harness_error"}
            res["error"] = f"not in {a.instances}"
        else:
            try:
                res = run_one(iid, instances[iid], opts)
            except (ValueError, rg.GitError, OSError) as e:  # DataError, ConvertError too
                res = {"instance_id": iid, "status": "harness_error", "error": str(e)[:500]}
        res["total_s"] = round(time.monotonic() - started, 2)
        with a.out.open("a") as f:
            f.write(json.dumps(res) + "\n")
        print(_progress(n, len(ids), res), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
