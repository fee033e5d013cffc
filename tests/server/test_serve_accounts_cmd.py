"""`kestrel serve tokens list|revoke` and `kestrel serve tenants list|set-plan`, as an operator
runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

KESTREL = [sys.executable, "-m", "kestrel", "serve"]


def _run(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*KESTREL, *args, "--data-dir", str(data)], capture_output=True, text=True, check=False
    )


def test_an_operator_lists_revokes_and_moves_tenants(tmp_path: Path) -> None:
    data = tmp_path / "data"
    empty = _run(data, "tokens", "list")
    assert empty.returncode == 2 and "create a token first" in empty.stderr
    made = [_run(data, "tokens", "create", "--tenant", name) for name in ("acme", "globex")]
    secrets = [m.stdout.strip().splitlines()[-1] for m in made]
    token_ids = [m.stdout.split("token ")[1].split(":")[0] for m in made]
    tenant_ids = [m.stdout.split()[1] for m in made]

    listed = _run(data, "tokens", "list")
    assert listed.returncode == 0, listed.stderr
    assert all(t in listed.stdout for t in token_ids) and "active" in listed.stdout
    assert not any(secret in listed.stdout for secret in secrets)  # Never the secrets.
    only = _run(data, "tokens", "list", "--tenant-id", tenant_ids[0])
    assert token_ids[0] in only.stdout and token_ids[1] not in only.stdout

    assert _run(data, "tokens", "revoke", token_ids[0]).returncode == 0
    assert "revoked" in _run(data, "tokens", "list", "--tenant-id", tenant_ids[0]).stdout

    tenants = _run(data, "tenants", "list")
    assert "acme  plan free" in tenants.stdout and "globex  plan free" in tenants.stdout
    moved = _run(data, "tenants", "set-plan", tenant_ids[1], "team")
    assert moved.returncode == 0 and "now on plan team" in moved.stdout
    assert "globex  plan team" in _run(data, "tenants", "list").stdout

    unknown = _run(data, "tenants", "set-plan", "ten_nope", "pro")
    assert unknown.returncode == 2 and "ten_nope" in unknown.stderr
    assert "Traceback" not in unknown.stderr
