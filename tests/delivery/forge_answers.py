"""GitHub's answers as the fake gives them: error bodies, pages of a list, and whether a JSON
value is what GitHub's published API description says an operation takes or answers (its
githubkit model accepts it strictly and it carries no key the model lacks)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import githubkit.versions.v2022_11_28.models as gh
from pydantic import BaseModel, ValidationError

DOCS = "https://docs.github.com/rest"
Query = dict[str, list[str]]


@dataclass(frozen=True, slots=True)
class Answer:
    """A status, a JSON payload (one object or a list of them) and the model each must fit."""

    status: int
    payload: Any
    model: type[BaseModel]


def error(status: int, message: str) -> Answer:
    """GitHub's error body: `Not Found`, `Bad credentials`, `Problems parsing JSON`, ..."""
    payload = {"message": message, "documentation_url": DOCS}
    if status == 422:  # `ValidationError` has no `status`; `BasicError` has, as GitHub sends it
        return Answer(status, payload, gh.ValidationError)
    return Answer(status, payload | {"status": str(status)}, gh.BasicError)


def invalid(field: str | None, code: str, message: str | None = None) -> Answer:
    """422 `Validation Failed` for a pull request's `field` (or a `custom` one with `message`)."""
    wrong = {"resource": "PullRequest", "code": code}
    wrong |= {"field": field} if field else {"message": message or code}
    payload = {"message": "Validation Failed", "errors": [wrong], "documentation_url": DOCS}
    return Answer(422, payload, gh.ValidationError)


def arg(query: Query, name: str) -> str:
    """The first value of query parameter `name`, or an empty string."""
    return query.get(name, [""])[0]


def page(items: list[Any], query: Query) -> list[Any]:
    """The part of `items` that `per_page` (30 by default, at most 100) and `page` select."""
    size = min(int(arg(query, "per_page") or 30), 100)
    start = (max(int(arg(query, "page") or 1), 1) - 1) * size
    return items[start : start + size]


def misfits(model: type[BaseModel], data: Any) -> list[str]:
    """What in `data` the model refuses, one line each; empty when it fits."""
    try:
        parsed = model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        return [
            f"{model.__name__}.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        ]
    return _unknown_keys(parsed, data, model.__name__)


def _unknown_keys(parsed: Any, data: Any, where: str) -> list[str]:
    """Keys in `data`, at any depth, that the model it was parsed into does not name."""
    if isinstance(parsed, BaseModel) and isinstance(data, dict):
        names = {(f.alias or n): n for n, f in type(parsed).model_fields.items()}
        found = [f"{where}.{k}: not a field of the model" for k in data if k not in names]
        for key, name in names.items():
            if key in data:
                found += _unknown_keys(getattr(parsed, name), data[key], f"{where}.{key}")
        return found
    if isinstance(parsed, list) and isinstance(data, list):
        pairs = enumerate(zip(parsed, data, strict=False))
        return [u for i, (p, d) in pairs for u in _unknown_keys(p, d, f"{where}[{i}]")]
    return []
