"""The whole API, driven from its own OpenAPI schema by schemathesis: no 5xx, and every response
as the schema says (status codes, content types, bodies)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance
from server_kit import Server


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    server = Server(tmp_path_factory.mktemp("schema"))
    server.start()
    token = server.token("fuzz")
    # One real session, so ids of an existing session are among what the run may use.
    client = server.client(token)
    script = server.script([{"text": "Nothing to do."}], "fuzz.json")
    client.post(
        "/sessions", json={"task": "t", "source": {"path": str(server.repo())}, "model": script}
    )
    yield server, token
    server.stop()


def test_the_api_keeps_to_its_schema(running: tuple[Server, str]) -> None:
    server, token = running
    # The schema the server serves is the checked-in one (test_openapi.py compares them).
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    headers = {"Authorization": f"Bearer {token}"}
    checked = 0
    for found in schema.get_all_operations():
        operation = found.ok()
        if operation.path.endswith("/stream"):
            continue  # An endless stream: the SSE tests cover it.

        @settings(
            max_examples=15,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            # Valid by the schema is not always acceptable (a path outside the allowed roots,
            # an id of no session): such answers must be documented 4xx, which is checked.
            case.call_and_validate(headers=headers, excluded_checks=[positive_data_acceptance])

        check()
        checked += 1
    assert checked >= 10
