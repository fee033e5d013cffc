"""Taking a task's text apart: identifiers, paths, dotted names and stack frames."""

from __future__ import annotations

from kestrel.context.query import parse_query
from kestrel.context.rank import PathIndex, about_tests, is_test_path, mention_scores

TASK = """Migrations uses value of enum object instead of its name.

When using `FunctionTypeSerializer` with a nested class method, `makemigrations` writes the
wrong path. See django/db/migrations/serializer.py and django.db.models.fields.Field.

Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/django/core/management/base.py", line 354, in run_from_argv
  File "/home/me/proj/django/db/migrations/writer.py", line 12, in as_string
ValueError: boom
"""


def test_identifiers_paths_and_frames() -> None:
    q = parse_query(TASK)
    assert "FunctionTypeSerializer" in q.identifiers
    assert "makemigrations" in q.identifiers
    assert "run_from_argv" in q.identifiers
    assert "Migrations" not in q.identifiers  # a capitalised English word is not code
    assert "django/db/migrations/serializer.py" in q.paths
    assert "django.db.models.fields.Field" in q.dotted
    assert [f.function for f in q.frames] == ["run_from_argv", "as_string"]
    assert q.frames[1].line == 12
    assert q.terms["enum"] == 1 + 2  # once in the text, plus the title weight


def test_mentions_resolve_to_repository_paths() -> None:
    paths = [
        "django/db/migrations/serializer.py",
        "django/db/migrations/writer.py",
        "django/core/management/base.py",
        "django/db/models/fields/__init__.py",
        "tests/migrations/test_writer.py",
    ]
    scores = mention_scores(parse_query(TASK), PathIndex(paths))
    assert scores["django/db/migrations/serializer.py"] == 1.0
    assert scores["django/db/migrations/writer.py"] > scores["django/core/management/base.py"]
    assert "django/db/models/fields/__init__.py" in scores
    assert "tests/migrations/test_writer.py" not in scores


def test_ambiguous_bare_names_are_not_mentions() -> None:
    paths = [f"pkg{i}/utils.py" for i in range(5)]
    assert mention_scores(parse_query("the bug is in utils.py"), PathIndex(paths)) == {}


def test_test_paths() -> None:
    for path in (
        "tests/a.py",
        "pkg/test_a.py",
        "a_test.go",
        "web/x.spec.ts",
        "conftest.py",
        "testing/b.py",
    ):
        assert is_test_path(path), path
    for path in ("src/_pytest/python.py", "latest.py", "contest/a.py", "attest.py"):
        assert not is_test_path(path), path
    assert about_tests(parse_query("tests/test_a.py fails"))
    assert not about_tests(parse_query("the parser crashes"))


def test_path_index_updated_in_place_answers_as_one_built_afresh() -> None:
    paths = [f"pkg{i}/utils.py" for i in range(3)] + ["app/models.py", "app/views/__init__.py"]
    index = PathIndex(paths[:2])
    for path in paths[2:]:
        index.add(path)
    index.remove("pkg0/utils.py")
    index.remove("not/there.py")
    index.add("pkg0/helpers.py")
    fresh = PathIndex([*paths[1:], "pkg0/helpers.py"])
    for mentioned in ("utils.py", "pkg1/utils.py", "pkg0/utils.py", "helpers.py", "views"):
        assert index.lookup(mentioned) == fresh.lookup(mentioned), mentioned
    assert index.lookup("helpers.py") == ["pkg0/helpers.py"]
