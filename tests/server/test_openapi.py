"""docs/openapi.json must be the API's schema as the code makes it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_schema_matches_the_code() -> None:
    spec = importlib.util.spec_from_file_location("gen_openapi", ROOT / "scripts/gen_openapi.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checked_in = json.loads((ROOT / "docs" / "openapi.json").read_text())
    assert module.schema() == checked_in, (
        "the API changed: run `python scripts/gen_openapi.py > docs/openapi.json`"
    )
