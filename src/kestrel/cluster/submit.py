"""Putting a session's run on the cluster's queue, from a server or any other process.

Only the engine's client is used: it writes to the queue's tables and imports none of the
worker's code. A run's workflow id is the session id and the log position it starts from, so
asking twice for the same run (a retried request, two servers) queues it once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kestrel.cluster.engine import QUEUE, SCHEMA, WORKFLOW, app_version, priority_of, require_dbos
from kestrel.cluster.runs import RunRequest


@dataclass(frozen=True, slots=True)
class RunState:
    """Where a run stands in the engine."""

    workflow_id: str
    status: str
    """ENQUEUED, PENDING (running), SUCCESS, ERROR, CANCELLED, …"""
    executor_id: str | None


def run_id(run: RunRequest) -> str:
    """The workflow id of a run: its session and where in the log it starts."""
    return f"{run.session_id}:{run.mark}"


def session_of(workflow_id: str) -> str:
    """The session a run's workflow id names."""
    return workflow_id.rsplit(":", 1)[0]


class Cluster:
    """A client of the cluster's queue."""

    def __init__(self, database_url: str) -> None:
        dbos = require_dbos()
        self._client = dbos.DBOSClient(system_database_url=database_url, dbos_system_schema=SCHEMA)

    def submit(self, run: RunRequest, *, tier: int = 0, workflow_id: str | None = None) -> str:
        """Queue `run` with its plan's tier; its workflow id (`run_id` unless one is given: a
        server names each run it queues, so a run withdrawn and asked for again is new)."""
        workflow_id = workflow_id or run_id(run)
        options: Any = {
            "workflow_name": WORKFLOW,
            "queue_name": QUEUE,
            "workflow_id": workflow_id,
            "priority": priority_of(tier),
            "queue_partition_key": run.tenant,
            "app_version": app_version(),
        }
        self._client.enqueue(options, run.as_args())
        return workflow_id

    def state(self, workflow_id: str) -> RunState | None:
        """Where the run stands, or None when no such run was queued."""
        found = self._client.list_workflows(workflow_ids=[workflow_id])
        if not found:
            return None
        return RunState(workflow_id, found[0].status, found[0].executor_id)

    def states(self, workflow_ids: list[str]) -> dict[str, str]:
        """The status of each of these runs that was queued (one query for all)."""
        if not workflow_ids:
            return {}
        found = self._client.list_workflows(
            workflow_ids=workflow_ids, load_input=False, load_output=False
        )
        return {w.workflow_id: w.status for w in found}

    def cancel(self, workflow_id: str) -> None:
        """Take a queued run off the queue (one under way ends at its step's end)."""
        self._client.cancel_workflow(workflow_id)

    def running_on(self, executor_id: str) -> list[str]:
        """The runs a worker holds now (their workflow ids)."""
        found = self._client.list_workflows(status="PENDING", executor_id=executor_id)
        return [w.workflow_id for w in found]

    def result(self, workflow_id: str) -> dict[str, Any]:
        """Wait for the run to end; what its workflow returned."""
        value: dict[str, Any] = self._client.retrieve_workflow(workflow_id).get_result()
        return value

    def close(self) -> None:
        """Let go of the client's connections."""
        self._client.destroy()
