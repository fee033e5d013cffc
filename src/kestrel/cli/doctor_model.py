"""`kestrel doctor --model M`: what Kestrel knows of a model and its endpoint.

For an OpenAI-compatible model: the endpoint's URL, the server kind (found with one cheap GET,
never a model call), and each capability requests are shaped by, with where its value came from
(a setting, detection, or the default). The doctor command lists these checks in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kestrel.models.endpoint import CAPABILITIES, OPENAI_URL, EndpointCapabilities, resolve
from kestrel.models.endpoint_probe import Detection, detect
from kestrel.settings import API_KEY_ENV, Settings

CheckStatus = Literal["ok", "warn", "fail", "info"]

ANTHROPIC_URL = "https://api.anthropic.com"


@dataclass(frozen=True, slots=True)
class DoctorCheck:
    """One line of the doctor's report: what was checked, how it went, and how to fix it."""

    name: str
    status: CheckStatus
    detail: str
    fix: str | None = None


def model_checks(
    spec: str, settings: Settings, env: Mapping[str, str], *, probe: bool = True
) -> list[DoctorCheck]:
    """Checks for the model `spec` (`provider:model`) as `settings` would reach it.

    With `probe`, an OpenAI-compatible endpoint is asked what it is (GET /v1/models and the
    like); no model is ever called.
    """
    provider = spec.partition(":")[0]
    base_url = settings.base_url if provider == settings.provider else None
    checks = [_credentials(provider, base_url, env)]
    if provider == "anthropic":
        url = base_url or env.get("ANTHROPIC_BASE_URL") or ANTHROPIC_URL
        checks.append(DoctorCheck("endpoint", "info", url))
    elif provider == "openai":
        checks += endpoint_checks(base_url or env.get("OPENAI_BASE_URL"), settings, env, probe)
    return checks


def endpoint_checks(
    base_url: str | None, settings: Settings, env: Mapping[str, str], probe: bool
) -> list[DoctorCheck]:
    """The endpoint's URL, its server kind and each capability, with where each came from."""
    choices = settings.endpoint.choices()
    probing = probe and choices.probe and choices.kind is None
    found = detect(base_url, api_key=env.get("OPENAI_API_KEY"), probe=probing)
    caps = resolve(choices, found.kind, found.evidence)
    checks = [DoctorCheck("endpoint", "info", base_url or OPENAI_URL), _kind_check(caps, found)]
    checks += _capability_checks(caps)
    if probing and not found.reached and found.kind is None:
        checks.append(
            DoctorCheck(
                "endpoint reachable",
                "warn",
                found.evidence,
                fix="start the server, or check base_url (--base-url, KESTREL_BASE_URL)",
            )
        )
    return checks


def _kind_check(caps: EndpointCapabilities, found: Detection) -> DoctorCheck:
    source = caps.source("kind")
    if source == "setting":
        return DoctorCheck("server kind", "ok", f"{caps.kind} (setting)")
    if source == "detected":
        return DoctorCheck("server kind", "ok", f"{caps.kind} (detected: {found.evidence})")
    return DoctorCheck(
        "server kind",
        "warn",
        f"not recognised ({found.evidence}); the safe defaults apply",
        fix='set it if you know it: [endpoint] kind = "llama-server" (or KESTREL_ENDPOINT_KIND)',
    )


def _capability_checks(caps: EndpointCapabilities) -> list[DoctorCheck]:
    values = {
        "max_tokens_field": caps.max_tokens_field,
        "stream_tool_calls": "yes" if caps.stream_tool_calls else "no (tool turns sent whole)",
        "tool_choice": caps.tool_choice,
        "usage": "expected" if caps.usage else "not expected (tokens are estimated)",
    }
    checks = []
    for name in CAPABILITIES:
        # No server needs a tool_choice: its default does not come from the kind.
        kind = "unknown" if name == "tool_choice" else caps.kind
        detail = f"{values[name]} ({_said(caps.source(name), kind)})"
        checks.append(DoctorCheck(name, "info", detail))
    return checks


def _said(source: str, kind: str) -> str:
    if source == "detected":
        return f"detected: {kind}"
    if source == "default" and kind != "unknown":
        return f"default for {kind}"
    return source


def _credentials(provider: str, base_url: str | None, env: Mapping[str, str]) -> DoctorCheck:
    variable = API_KEY_ENV.get(provider)
    if variable is None:
        return DoctorCheck("credentials", "ok", f"{provider} models need no API key")
    if env.get(variable):
        return DoctorCheck("credentials", "ok", f"{variable} is set")
    if base_url or (provider == "openai" and env.get("OPENAI_BASE_URL")):
        return DoctorCheck("credentials", "ok", "a local endpoint; no API key needed")
    return DoctorCheck(
        "credentials",
        "fail",
        f"{variable} is not set",
        fix=f"export {variable}=... or choose another model with --model",
    )
