"""Where the replay's inputs come from: trajectories, instances (repository and base commit) and
the local git mirrors. Nothing here touches the network."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

RESULTS_PREFIX = "swebench_results/20251118_gemini-3-pro-74pct"


class DataError(ValueError):
    """An input is missing or not in the expected format; the message is one sentence."""


@dataclass(frozen=True, slots=True)
class Instance:
    """A task: the repository (owner/name) and the commit the original run started from."""

    repo: str
    base_commit: str


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _git_show(git_dir: Path, rev: str, rel: str) -> str | None:
    done = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{rev}:{RESULTS_PREFIX}/{rel}"],
        capture_output=True,
        text=True,
    )
    return done.stdout if done.returncode == 0 else None


def load_trajectory(source: Path, iid: str, rev: str = "HEAD") -> tuple[object, bool | None]:
    """The trajectory of `iid` and whether the original run resolved its task (None: unknown).

    `source` is a git dir of the trajectories repository (read at `rev`), a checkout of it, or a
    folder laid out as `trajs/<id>/<id>.traj.json` (and optionally `logs/<id>/report.json`)."""
    rel_traj, rel_report = f"trajs/{iid}/{iid}.traj.json", f"logs/{iid}/report.json"
    if _is_git_dir(source):
        traj_text, report = _git_show(source, rev, rel_traj), _git_show(source, rev, rel_report)
    else:
        base = source / RESULTS_PREFIX if (source / RESULTS_PREFIX).is_dir() else source
        path = base / rel_traj
        traj_text = path.read_text() if path.is_file() else None
        report_path = base / rel_report
        report = report_path.read_text() if report_path.is_file() else None
    if traj_text is None:
        raise DataError(f"no trajectory for {iid} in {source}")
    try:
        traj = json.loads(traj_text)
    except ValueError as e:
        raise DataError(f"the trajectory of {iid} is not JSON: {e}") from None
    return traj, _resolved(report, iid)


def _resolved(report: str | None, iid: str) -> bool | None:
    if not report:
        return None
    try:
        data = json.loads(report)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get(iid), dict):
        data = data[iid]  # SWE-bench nests the report under the id
    if isinstance(data, dict) and "resolved" in data:
        return bool(data["resolved"])
    return None


def load_instances(path: Path) -> dict[str, Instance]:
    """`{id: [owner/name, base_commit]}`, or SWE-bench rows (a list, or JSON Lines, of objects
    with `instance_id`, `repo` and `base_commit`)."""
    try:
        text = path.read_text()
    except OSError as e:
        raise DataError(f"cannot read the instances file {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as e:
            raise DataError(f"{path} is neither JSON nor JSON Lines: {e}") from None
    try:
        if isinstance(data, dict):
            return {k: Instance(repo=v[0], base_commit=v[1]) for k, v in data.items()}
        return {
            r["instance_id"]: Instance(repo=r["repo"], base_commit=r["base_commit"]) for r in data
        }
    except (KeyError, IndexError, TypeError) as e:
        raise DataError(f"{path}: an instance lacks its repository or base commit ({e})") from None


def read_ids(ids: list[str], ids_file: Path | None) -> list[str]:
    """Ids given on the command line, then those of the file (one a line, # comments)."""
    out = list(ids)
    if ids_file is not None:
        try:
            lines = ids_file.read_text().splitlines()
        except OSError as e:
            raise DataError(f"cannot read the ids file {ids_file}: {e.strerror}") from None
        out += [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    return out


def parse_overrides(items: list[str]) -> dict[str, Path]:
    """`owner/name=GIT_DIR` items as a mapping."""
    out = {}
    for item in items:
        repo, sep, git_dir = item.partition("=")
        if not sep or "/" not in repo or not git_dir:
            raise DataError(f"--mirror-override wants owner/name=GIT_DIR, not {item!r}")
        out[repo] = Path(git_dir)
    return out


def mirror_for(repo: str, root: Path | None, overrides: dict[str, Path]) -> Path:
    """The git dir holding `repo`: an override, else `<root>/<owner>+<name>/repo`."""
    if repo in overrides:
        return overrides[repo]
    if root is None:
        raise DataError(f"no mirror for {repo}: give --mirror-root or --mirror-override")
    return root / repo.replace("/", "+") / "repo"
