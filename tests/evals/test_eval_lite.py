"""Importing the SWE-bench Lite dev file, and scoring a scripted run on one of its instances.

No checkout of the real repository can be made here (that needs the network), so the scored run
uses a STAND-IN: a small local git repository written below, holding only the files the
instance's tests and fix touch, in the same places, with the same bug. Its commit id cannot be
the instance's `base_commit`, so that one field of the task line is replaced by the stand-in's
commit; everything else (problem statement, hidden test patch, test ids) is the file's own.
The model is scripted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from evals_kit import KESTREL, isolated_env, make_repo, results_of

from kestrel.evals.tasks import load_suite

LITE = Path(__file__).parents[2] / ".." / "shared" / "bench" / "localization" / "lite_dev.jsonl"
INSTANCE = "django__django-15851"

pytestmark = pytest.mark.skipif(not LITE.is_file(), reason="the Lite dev file is not here")

CLIENT = '''"""Stand-in for the PostgreSQL client module: builds the psql command line."""


class DatabaseClient:
    executable_name = "psql"

    @classmethod
    def settings_to_cmd_args_env(cls, settings_dict, parameters):
        options = settings_dict.get("OPTIONS", {})
        args = [cls.executable_name]
        for flag, key in (("-U", "USER"), ("-h", "HOST"), ("-p", "PORT")):
            if settings_dict.get(key):
                args += [flag, str(settings_dict[key])]
        dbname = settings_dict.get("NAME") or ("" if options.get("service") else "postgres")
        if dbname:
            args += [dbname]
        args.extend(parameters)

        variables = (
            ("PGPASSWORD", settings_dict.get("PASSWORD")),
            ("PGSERVICE", options.get("service")),
            ("PGSSLMODE", options.get("sslmode")),
            ("PGPASSFILE", options.get("passfile")),
        )
        env = {name: str(value) for name, value in variables if value}
        return args, env or None
'''

TESTS = '''"""Stand-in tests, named as the instance's tests are."""

import unittest
from unittest import skipUnless

from django.db import connection
from django.db.backends.postgresql.client import DatabaseClient


class PostgreSqlDbshellCommandTestCase(unittest.TestCase):
    def settings_to_cmd_args_env(self, settings_dict, parameters=None):
        return DatabaseClient.settings_to_cmd_args_env(settings_dict, parameters or [])

    def test_basic(self):
        self.assertEqual(
            self.settings_to_cmd_args_env({"NAME": "db", "USER": "u", "PASSWORD": "pw"}),
            (["psql", "-U", "u", "db"], {"PGPASSWORD": "pw"}),
        )

    def test_nopass(self):
        self.assertEqual(self.settings_to_cmd_args_env({"NAME": "db"}), (["psql", "db"], None))

    def test_ssl_certificate(self):
        env = self.settings_to_cmd_args_env({"NAME": "db", "OPTIONS": {"sslmode": "verify-ca"}})[1]
        self.assertEqual(env, {"PGSSLMODE": "verify-ca"})

    def test_service(self):
        self.assertEqual(
            self.settings_to_cmd_args_env({"OPTIONS": {"service": "svc"}}),
            (["psql"], {"PGSERVICE": "svc"}),
        )

    def test_passfile(self):
        env = self.settings_to_cmd_args_env({"NAME": "db", "OPTIONS": {"passfile": "~/.pgpass"}})[1]
        self.assertEqual(env, {"PGPASSFILE": "~/.pgpass"})

    def test_column(self):
        args = self.settings_to_cmd_args_env({"NAME": "db", "USER": "some:user", "HOST": "::1"})[0]
        self.assertEqual(args, ["psql", "-U", "some:user", "-h", "::1", "db"])

    def test_accent(self):
        args = self.settings_to_cmd_args_env({"NAME": "db", "USER": "r\\u00f4le"})[0]
        self.assertEqual(args, ["psql", "-U", "r\\u00f4le", "db"])

    def test_parameters(self):
        self.assertEqual(
            self.settings_to_cmd_args_env({"NAME": "dbname"}, ["--help"]),
            (["psql", "dbname", "--help"], None),
        )

    @skipUnless(connection.vendor == "postgresql", "Requires a PostgreSQL connection")
    def test_crash_password_does_not_leak(self):
        args, env = self.settings_to_cmd_args_env({"NAME": "db", "PASSWORD": "secret"})
        self.assertNotIn("secret", " ".join(args))
'''

RUNTESTS = '''"""Stand-in for the project's test runner: runs unittest labels, verbosely."""

import argparse
import sys
import unittest
from pathlib import Path
from typing import Any

here = Path(__file__).resolve().parent
sys.path[:0] = [str(here), str(here.parent)]
parser = argparse.ArgumentParser()
parser.add_argument("--verbosity", type=int, default=1)
parser.add_argument("labels", nargs="*")
options = parser.parse_args()
unittest.main(module=None, argv=["runtests", *options.labels], verbosity=options.verbosity)
'''

STAND_IN = {
    "django/__init__.py": '"""Stand-in package."""\n',
    "django/db/__init__.py": 'class _Connection:\n    vendor = "postgresql"\n\n\n'
    "connection = _Connection()\n",
    "django/db/backends/__init__.py": "",
    "django/db/backends/postgresql/__init__.py": "",
    "django/db/backends/postgresql/client.py": CLIENT,
    "tests/runtests.py": RUNTESTS,
    "tests/dbshell/__init__.py": "",
    "tests/dbshell/test_postgresql.py": TESTS,
}

OLD = "        if dbname:\n            args += [dbname]\n        args.extend(parameters)\n"
NEW = "        args.extend(parameters)\n        if dbname:\n            args += [dbname]\n"
SCRIPT = [
    {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": "django/db/backends/postgresql/client.py"}}
        ],
        "usage": {"input_tokens": 3000, "output_tokens": 40, "cost_usd": 0.01},
    },
    {
        "text": "psql wants its options before the database name.",
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {
                    "path": "django/db/backends/postgresql/client.py",
                    "old_str": OLD,
                    "new_str": NEW,
                },
            }
        ],
        "usage": {"input_tokens": 3500, "output_tokens": 120, "cost_usd": 0.02},
    },
    {"text": "Done.", "usage": {"input_tokens": 3600, "output_tokens": 10, "cost_usd": 0.01}},
]


def test_every_lite_instance_imports_as_a_runnable_task() -> None:
    tasks = load_suite(LITE)
    raw = [json.loads(line) for line in LITE.read_text().splitlines() if line.strip()]
    assert len(tasks) == len(raw) == 60
    for task, line in zip(tasks, raw, strict=True):
        assert task.instance_id == line["instance_id"] and task.base_commit == line["base_commit"]
        assert list(task.fail_to_pass) == json.loads(line["FAIL_TO_PASS"])
        assert list(task.pass_to_pass) == json.loads(line["PASS_TO_PASS"])
        assert list(task.gold_files) == line["gold_files"]
        assert task.test_patch.startswith("diff --git") and task.tests


def _line() -> dict[str, Any]:
    lines = [json.loads(text) for text in LITE.read_text().splitlines() if text.strip()]
    return next(line for line in lines if line["instance_id"] == INSTANCE)


def test_a_scripted_run_on_a_lite_instance_is_scored(tmp_path: Path) -> None:
    line = _line()
    commit, _ = make_repo(tmp_path / "repos" / "django__django", STAND_IN, {})
    suite = tmp_path / "lite_one.jsonl"
    suite.write_text(json.dumps({**line, "base_commit": commit}) + "\n")  # The stand-in's commit.
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    runs = tmp_path / "runs"
    done = subprocess.run(
        [
            *KESTREL,
            "eval",
            "run",
            str(suite),
            "--model",
            f"scripted:{script}",
            "--sandbox",
            "none",
            "--repos",
            str(tmp_path / "repos"),
            "--runs-dir",
            str(runs),
            "--run-id",
            "lite",
            "--test-cmd",
            f"{sys.executable} tests/runtests.py --verbosity 2",
        ],
        env=isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = results_of(runs / "lite")[INSTANCE]
    tests = json.loads(line["FAIL_TO_PASS"]) + json.loads(line["PASS_TO_PASS"])
    assert result["tests"] == dict.fromkeys(tests, "pass")
    assert result["status"] == "resolved" and result["error"] is None
    assert result["gold_files"] == ["django/db/backends/postgresql/client.py"]
    assert result["files_read"] == result["files_edited"] == result["gold_files"]
    assert (result["loc_precision"], result["loc_recall"], result["edit_apply_success"]) == (
        1.0,
        1.0,
        1.0,
    )
    assert (result["turns"], result["input_tokens"], result["output_tokens"]) == (3, 10100, 170)
    assert result["cost_usd"] == pytest.approx(0.04)
    assert result["token_efficiency"] == pytest.approx(6660 / 10270)
    # The hidden test patch was applied to the tested copy: test_parameters expects the new order.
    tested = runs / "lite" / "tasks" / INSTANCE / "tests_repo" / "tests" / "dbshell"
    assert '["psql", "--help", "dbname"]' in (tested / "test_postgresql.py").read_text()


def test_the_real_commit_missing_from_a_repository_is_a_clear_task_error(tmp_path: Path) -> None:
    make_repo(tmp_path / "repos" / "django__django", STAND_IN, {})
    runs = tmp_path / "runs"
    done = subprocess.run(
        [
            *KESTREL,
            *("eval", "run", str(LITE), "--instances", INSTANCE, "--model", "scripted:x.json"),
            *("--sandbox", "none", "--repos", str(tmp_path / "repos"), "--runs-dir", str(runs)),
            *("--run-id", "real"),
        ],
        env=isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = results_of(runs / "real")[INSTANCE]
    assert result["status"] == "error" and not result["resolved"]
    assert result["error"].startswith(f"commit {_line()['base_commit']} is not in ")
    assert "django__django" in result["error"]
