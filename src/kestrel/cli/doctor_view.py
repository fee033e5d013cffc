"""What `kestrel doctor` shows of the sandbox's filesystem: every mount, and what is left out."""

from __future__ import annotations

import os
from pathlib import Path

from kestrel.app import data_dir, masked_data
from kestrel.protocol.errors import ConfigError
from kestrel.sandbox.bwrap import SYSTEM_SECRETS
from kestrel.sandbox.view import Mount, ViewOptions, build_view
from kestrel.settings_load import load_settings
from kestrel.store import default_data_dir

NOT_SHOWN = "/run, /var/run, /var/lib, /srv, /mnt, /media, /opt, other homes, Kestrel's data"
"""What the view leaves out, named for people reading the doctor's report."""

_LABELS = {"ro": "ro", "rw": "rw", "tmpfs": "empty", "masked": "masked", "symlink": "link"}


def view_settings(root: Path) -> tuple[Path, ViewOptions, str]:
    """Kestrel's data dir and the view options the settings for `root` ask for, and a problem
    with those settings ('' if none; then the defaults are used)."""
    try:
        settings = load_settings(root, env=os.environ, flags={}, home=Path.home())
        data = data_dir(settings)
        return data, settings.sandbox_view.options(data), ""
    except ConfigError as exc:
        return default_data_dir(os.environ), ViewOptions(), str(exc)


def doctor_view(root: Path) -> list[str]:
    """The doctor's lines about the view a command in workspace `root` gets."""
    data, options, problem = view_settings(root)
    masked = [*map(Path, SYSTEM_SECRETS), *masked_data(data, root)]
    lines = [f"view: what a sandboxed command in {root} sees (the root is empty and read-only)"]
    if problem:
        lines.append("  note  the settings have problems (listed above), so the defaults are shown")
    lines += [render_mount(mount) for mount in build_view(root, masked, options)]
    lines.append(f"  not shown: {NOT_SHOWN}; no host socket")
    return lines


def render_mount(mount: Mount) -> str:
    """One mount as a line: kind, target (and source where it differs), why."""
    where = mount.target
    if mount.kind == "symlink":
        where += f" -> {mount.source}"
    elif mount.kind in ("ro", "rw") and mount.source and mount.source != mount.target:
        where += f" (from {mount.source})"
    label = _LABELS.get(mount.kind, mount.kind)
    return f"  {label:<6}  {where}" + (f"  [{mount.why}]" if mount.why else "")
