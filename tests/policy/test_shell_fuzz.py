"""A bounded fuzz of the shell parser, the gate and the rule matcher, run on every test run.

The generator and the checks are those of `bench/fuzz_shell.py` (which runs long campaigns):
structured bash with every kind of quoting, heredocs, substitutions and redirections, control
characters and unicode, and real commands cut short or mutated. The checks: nothing raises, and
a line the parser cannot read with certainty, or that `bash -n` rejects, is never allowed.
Hypothesis drives the generator's choices, so a failure shrinks to a small reproducer.
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kestrel.policy.rules import RuleError, parse_rule
from kestrel.policy.shell import parse_shell

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def _harness() -> ModuleType:
    path = Path(__file__).parents[2] / "bench" / "fuzz_shell.py"
    spec = importlib.util.spec_from_file_location("fuzz_shell", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_shell"] = module
    spec.loader.exec_module(module)
    return module


FUZZ = _harness()
SEEDS: list[str] = FUZZ._seeds()
BOUNDED = settings(
    max_examples=250,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@BOUNDED
@given(st.randoms(use_true_random=False))
def test_generated_bash_breaks_no_promise(rng: random.Random) -> None:
    command = FUZZ.generate(rng, SEEDS)
    assert FUZZ.check(command) == [], command


_SHELLY = st.lists(
    st.sampled_from([*list("ab $'\"\\`(){}<>|&;#=*?[]~!\n\t-"), "EOF", "<<", "é", "\x01"]),
    max_size=30,
).map("".join)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(_SHELLY)
def test_raw_text_breaks_no_promise(command: str) -> None:
    assert FUZZ.check(command) == [], command


@settings(max_examples=150, derandomize=True, deadline=None)
@given(st.text(max_size=60))
def test_any_rule_text_parses_or_is_refused_clearly(text: str) -> None:
    for form in ("Bash({})", "BashExact({})", "BashRegex({})", "BashHeredoc({})", "{}"):
        try:
            parse_rule(form.format(text))
        except RuleError as exc:
            assert str(exc)  # a message, never a bare error


def test_the_checks_can_fail() -> None:
    # The oracle sees what the parser patched up: bash rejects both, and neither is allowed.
    for line in ("fi", "python3 -c \"print('a"):
        assert FUZZ.bash_rejects(line)
        assert any(r.kind == "syntax-error" for r in parse_shell(line).risks)
        assert FUZZ.check(line) == []
    assert not FUZZ.bash_rejects("echo ok > out.txt")


def test_the_campaign_runs_unattended_and_writes_its_checkpoint(tmp_path: Path) -> None:
    checkpoint = tmp_path / "fuzz.json"
    script = Path(__file__).parents[2] / "bench" / "fuzz_shell.py"
    args = ["--cpu-seconds", "2", "--workers", "2", "--seed", "1", "--checkpoint", str(checkpoint)]
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "examples" in done.stdout and "failures: 0" in done.stdout
    totals = json.loads(checkpoint.read_text())
    assert totals["done"] is True and totals["examples"] > 0 and totals["failures"] == []
