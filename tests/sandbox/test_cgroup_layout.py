"""Per-command cgroups are laid out right for each hierarchy, without needing a real one."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kestrel.sandbox.limits import CgroupSupport, CommandCgroup, Limits


def test_on_v2_one_cgroup_carries_every_limit(tmp_path: Path) -> None:
    support = CgroupSupport(
        version=2, writable=("memory", "pids"), bases={"memory": tmp_path, "pids": tmp_path}
    )
    cgroup = CommandCgroup(support, Limits(memory_bytes=1024, max_processes=7))
    procs = cgroup.create()
    (made,) = {p.parent for p in procs}
    assert len(procs) == 1
    assert (made / "memory.max").read_text() == "1024"
    assert (made / "pids.max").read_text() == "7"
    for name in ("memory.max", "memory.swap.max", "pids.max"):
        (made / name).unlink(missing_ok=True)
    asyncio.run(cgroup.remove())
    assert not made.exists()


def test_on_v1_each_controller_has_its_own_cgroup(tmp_path: Path) -> None:
    memory, pids = tmp_path / "memory", tmp_path / "pids"
    memory.mkdir()
    pids.mkdir()
    support = CgroupSupport(
        version=1, writable=("memory", "pids"), bases={"memory": memory, "pids": pids}
    )
    procs = CommandCgroup(support, Limits(max_processes=9)).create()
    assert sorted(p.parent.parent.name for p in procs) == ["memory", "pids"]
    (pid_dir,) = [p.parent for p in procs if p.parent.parent == pids]
    assert (pid_dir / "pids.max").read_text() == "9"
