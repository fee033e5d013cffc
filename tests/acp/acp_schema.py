"""Every message the agent sends, checked against the protocol's JSON schema.

Twice, by method: against the definition of the protocol's published schema
(`vendor/schema-v1.19.0.json`) and against the JSON schema of the model the SDK generated from
it (`acp.schema`) of the same name: requests and notifications by their method, responses by the
method of the request they answer, errors by the JSON-RPC error object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import acp.schema as schema
from acp.connection import StreamDirection, StreamEvent
from jsonschema import Draft202012Validator
from pydantic import BaseModel

AGENT_REQUESTS: dict[str, type[BaseModel]] = {
    "session/request_permission": schema.RequestPermissionRequest,
    "fs/read_text_file": schema.ReadTextFileRequest,
    "fs/write_text_file": schema.WriteTextFileRequest,
}
AGENT_NOTIFICATIONS: dict[str, type[BaseModel]] = {"session/update": schema.SessionNotification}
RESPONSES: dict[str, type[BaseModel]] = {
    "initialize": schema.InitializeResponse,
    "authenticate": schema.AuthenticateResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/prompt": schema.PromptResponse,
    "session/set_mode": schema.SetSessionModeResponse,
}
ENVELOPE = {
    "type": "object",
    "required": ["jsonrpc"],
    "properties": {
        "jsonrpc": {"const": "2.0"},
        "id": {"type": ["integer", "string", "null"]},
        "method": {"type": "string"},
    },
}


PUBLISHED = Path(__file__).parent / "vendor" / "schema-v1.19.0.json"


@cache
def published(name: str) -> Draft202012Validator:
    """The published schema's definition `name` (a request's params, a result, an error)."""
    document = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    if name not in document["$defs"]:
        raise KeyError(f"the published schema defines no {name}")
    found = {"$defs": document["$defs"], "$ref": f"#/$defs/{name}"}
    Draft202012Validator.check_schema(found)
    return Draft202012Validator(found)


_MODELS: dict[type[BaseModel], Draft202012Validator] = {}


def validator(model: type[BaseModel]) -> Draft202012Validator:
    """A validator for the JSON form of `model` (the published definition of the same name is
    checked beside it)."""
    if model not in _MODELS:
        found = model.model_json_schema(by_alias=True)
        Draft202012Validator.check_schema(found)
        _MODELS[model] = Draft202012Validator(found)
    return _MODELS[model]


@dataclass
class SchemaCheck:
    """Watches a connection's messages; what breaks the schema is kept in `problems`."""

    problems: list[str] = field(default_factory=list)
    checked: int = 0
    _asked: dict[Any, str] = field(default_factory=dict)

    def observe(self, event: StreamEvent) -> None:
        """Remember the editor's requests; check each message from the agent."""
        message = event.message
        if event.direction is StreamDirection.OUTGOING:
            if "method" in message and "id" in message:
                self._asked[message["id"]] = message["method"]
            return
        self.checked += 1
        self._check(Draft202012Validator(ENVELOPE), message, "envelope")
        if "method" in message:
            table = AGENT_REQUESTS if "id" in message else AGENT_NOTIFICATIONS
            model = table.get(message["method"])
            if model is None:
                self.problems.append(f"unexpected method from the agent: {message['method']}")
                return
            self._check(validator(model), message.get("params"), message["method"])
            return
        self._check_response(message)

    def _check_response(self, message: dict[str, Any]) -> None:
        if ("result" in message) == ("error" in message):
            self.problems.append(f"a response needs a result or an error: {message}")
            return
        if "error" in message:
            self._check(validator(schema.Error), message["error"], "error")
            return
        method = self._asked.get(message.get("id"))
        model = RESPONSES.get(method or "")
        if model is None:
            self.problems.append(f"a response to an unknown request: {message}")
            return
        self._check(validator(model), message["result"], f"{method} result")

    def _check(self, check: Draft202012Validator, value: Any, where: str) -> None:
        model = next((m for m, v in _MODELS.items() if v is check), None)
        checks = [check] if model is None else [check, published(model.__name__)]
        for error in (e for each in checks for e in each.iter_errors(value)):
            self.problems.append(f"{where}: {error.message} at {list(error.absolute_path)}")
