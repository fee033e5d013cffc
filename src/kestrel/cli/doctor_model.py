"""`kestrel doctor --model M`: what Kestrel knows of a model and its endpoint.

The provider work fills this in (endpoint kind and capabilities, detected from the server);
the doctor command lists whatever these checks return, in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kestrel.settings import API_KEY_ENV, Settings

CheckStatus = Literal["ok", "warn", "fail", "info"]


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    """One line of the doctor's report: what was checked, how it went, and how to fix it."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None


def model_checks(spec: str, settings: Settings, env: Mapping[str, str]) -> list[DoctorCheck]:
    """Checks for the model `spec` (`provider:model`) as `settings` would reach it."""
    provider = spec.partition(":")[0]
    variable = API_KEY_ENV.get(provider)
    if variable is None:
        return [DoctorCheck("credentials", "ok", f"{provider} models need no API key")]
    if env.get(variable):
        return [DoctorCheck("credentials", "ok", f"{variable} is set")]
    if settings.base_url or (provider == "openai" and env.get("OPENAI_BASE_URL")):
        return [DoctorCheck("credentials", "ok", "a local endpoint; no API key needed")]
    return [
        DoctorCheck(
            "credentials",
            "fail",
            f"{variable} is not set",
            fix=f"export {variable}=... or choose another model with --model",
        )
    ]
