"""Print the HTTP API's OpenAPI schema: `python scripts/gen_openapi.py > docs/openapi.json`.

The checked-in copy is compared with the code by tests/server/test_openapi.py, so a change to
the API shows up in review as a change to this file.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from kestrel.server.app import create_app
from kestrel.server.hosting import ServerConfig


def schema() -> dict[str, object]:
    """The API's schema, as the server would serve it (nothing is opened to build it)."""
    config = ServerConfig(data_dir=Path(tempfile.gettempdir()) / "kestrel-openapi-unused")
    return create_app(config).openapi()


if __name__ == "__main__":
    print(json.dumps(schema(), indent=2, sort_keys=True))
