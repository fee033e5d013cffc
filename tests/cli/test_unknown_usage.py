"""A real session against a local OpenAI-wire server that reports no usage, for a model with no
price: the tokens are estimated and marked, the cost is unknown rather than $0, budgets that
cannot work say so, and a token budget still stops the session."""

from __future__ import annotations

import json
import re

from cli_kit import Env
from no_usage_server import NoUsageServer, Turn

MODEL = "openai:my-local-model"


def listing(n: int) -> Turn:
    """A different `list_files` call each turn, so no loop is detected."""
    return {"tool": "list_files", "arguments": {"pattern": f"*{n}*"}}


def run_against(env: Env, server: NoUsageServer, *extra: str) -> tuple[int, dict, str]:
    """Run a headless JSON session on `server`; its exit code, result and stderr."""
    env.vars["KESTREL_BASE_URL"] = server.url
    ran = env.run(
        *("-p", "list the files", "--model", MODEL, "--output-format", "json"),
        *("--permission-mode", "accept-edits", *extra),
    )
    assert ran.stdout.strip(), ran.stderr
    return ran.returncode, json.loads(ran.stdout), ran.stderr


def test_estimated_tokens_and_unknown_cost_reach_json_footer_and_sessions(env: Env) -> None:
    env.vars["COLUMNS"] = "400"  # the footer on one line
    replies = [listing(0), {"text": "Two files."}]
    with NoUsageServer(lambda n: replies[min(n, 1)]) as server:
        code, result, err = run_against(env, server, "--max-cost", "1")
    assert code == 0, err
    totals = result["totals"]
    # The system prompt and tool schemas alone are thousands of tokens: far from the 0 reported.
    assert totals["tokens"] > 1_000 and totals["input_tokens"] > totals["output_tokens"] > 0
    assert (totals["tokens_estimated"], totals["cost_known"], totals["cost_usd"]) == (
        True,
        False,
        0.0,
    )
    assert (
        "kestrel: warning: the cost budget cannot be enforced: no price is known for "
        f"{MODEL} (Kestrel's built-in price table has no entry for it" in err
    )
    assert err.count("kestrel: warning:") == 1

    shown = env.run("sessions", "show", result["session_id"])
    footer = next(line for line in shown.stdout.splitlines() if line.startswith("── done"))
    assert re.search(r" · ~\d+(\.\d)?k tokens \(estimated\) · \$\? · ", footer), footer
    assert "$0.0000" not in shown.stdout
    assert "budget: the cost budget cannot be enforced: no price is known for" in shown.stdout
    spent = [line.strip() for line in shown.stdout.splitlines() if "⋯ spent" in line]
    assert len(spent) == 2 and all(re.fullmatch(r"⋯ spent ~\S+ tokens · \$\?", s) for s in spent)

    listed = json.loads(env.run("sessions", "list", "--json").stdout)
    assert [(row["cost_usd"], row["cost_known"]) for row in listed] == [(0.0, False)]
    table = env.run("sessions", "list").stdout
    assert "$?" in table and "$0.0000" not in table


def test_a_token_budget_still_stops_the_session(env: Env) -> None:
    with NoUsageServer(listing) as server:
        # Without estimates every call would count 0 tokens and only the turn budget would stop it.
        env.vars["KESTREL_MAX_TOKENS"] = "15000"
        code, result, err = run_against(env, server, "--max-turns", "12")
        calls = len(server.requests)
    assert code == 3, err
    assert result["reason"] == "budget" and result["detail"].startswith("tokens budget spent")
    assert result["totals"]["tokens"] >= 15_000 and result["totals"]["tokens_estimated"] is True
    assert 1 <= calls < 12
    assert (
        "kestrel: warning: the token budget counts estimates: the server for my-local-model "
        "reports no token usage" in err
    )
