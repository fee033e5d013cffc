"""The hosted memory's store and repository names, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.memory_store import MemoryEntryError
from kestrel.server.intake import Archive, GitUrl, LocalPath
from kestrel.server.memory import HostedMemory, repository_key


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/acme/shop.git",
        "https://GitHub.com/acme/shop/",
        "git@github.com:acme/shop.git",
        "ssh://git@github.com/acme/shop",
    ],
)
def test_the_ways_to_name_one_repository_are_one_key(url: str) -> None:
    assert repository_key(GitUrl(url)) == "github.com/acme/shop"


def test_other_sources_are_named_by_folder_or_not_at_all(tmp_path: Path) -> None:
    assert repository_key(GitUrl("https://example.com:8443/a/b.git")) == "example.com:8443/a/b"
    assert repository_key(LocalPath(str(tmp_path / "x" / ".." / "r"))) == f"path:{tmp_path}/r"
    assert repository_key(Archive(b"x", "tar")) == ""


def test_entries_are_kept_per_tenant_and_repository(tmp_path: Path) -> None:
    memory = HostedMemory(tmp_path / "memory.db")
    kept = memory.add("acme", "github.com/acme/shop", "Use httpx,\n not requests.", "review")
    memory.add("acme", "github.com/acme/other", "Tabs, never spaces.", "by hand")
    memory.add("globex", "github.com/acme/shop", "Their own rule.", "by hand")

    assert kept.text == "Use httpx, not requests."
    assert [e.text for e in memory.entries("acme", "github.com/acme/shop")] == [kept.text]
    assert memory.context("globex", "github.com/acme/shop").endswith("- Their own rule.")
    assert "httpx" in memory.context("acme", "github.com/acme/shop")
    assert memory.context("acme", "") == ""
    assert memory.remove("globex", kept.id) is None
    with pytest.raises(MemoryEntryError, match="already remembered"):
        memory.add("acme", "github.com/acme/shop", "Use httpx, not requests.", "again")
    with pytest.raises(MemoryEntryError, match="an upload"):
        memory.add("acme", "", "A rule.", "by hand")
    memory.remember_session("acme", "s1", "github.com/acme/shop")
    assert memory.repository_of("acme", "s1") == "github.com/acme/shop"
    assert memory.repository_of("globex", "s1") == ""
    assert memory.remove("acme", kept.id) == kept
    assert memory.entries("acme", "github.com/acme/shop") == []
    memory.close()
