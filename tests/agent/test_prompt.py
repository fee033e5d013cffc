from pathlib import Path

from kestrel.agent.prompt import (
    MAX_MEMORY_CHARS,
    build_system_prompt,
    find_memory_files,
    load_memory,
    repository_root,
)


def test_memory_files_from_the_repository_root_down_to_the_working_directory(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "AGENTS.md"
    outside.write_text("not part of the repository")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("root rules")
    (repo / "CLAUDE.md").write_text("claude rules")
    pkg = repo / "pkg" / "sub"
    pkg.mkdir(parents=True)
    (repo / "pkg" / "AGENTS.md").write_text("package rules")
    user = tmp_path / "config"
    user.mkdir()
    (user / "AGENTS.md").write_text("my own rules")

    found = find_memory_files(pkg, user_config_dir=user)
    assert found == [
        user / "AGENTS.md",
        repo / "AGENTS.md",
        repo / "CLAUDE.md",
        repo / "pkg" / "AGENTS.md",
    ]
    assert repository_root(pkg) == repo

    prompt = build_system_prompt(cwd=pkg, memory=load_memory(found), today="2026-01-01")
    order = [
        prompt.index(t) for t in ("my own rules", "root rules", "claude rules", "package rules")
    ]
    assert order == sorted(order)
    assert "not part of the repository" not in prompt
    assert f"Working directory: {pkg}" in prompt and "Date: 2026-01-01" in prompt


def test_outside_a_repository_only_the_working_directory_counts(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("parent")
    work = tmp_path / "work"
    work.mkdir()
    (work / "AGENTS.md").write_text("here")
    assert find_memory_files(work) == [work / "AGENTS.md"]


def test_a_huge_memory_file_is_cut_with_a_note(tmp_path: Path) -> None:
    big = tmp_path / "AGENTS.md"
    big.write_text("x" * (MAX_MEMORY_CHARS + 10))
    (loaded,) = load_memory([big])
    assert len(loaded.text) < MAX_MEMORY_CHARS + 200
    assert "the rest was left out" in loaded.text
