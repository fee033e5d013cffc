"""Which review feedback is new, and the forge settings a server reads from its environment."""

from __future__ import annotations

import pytest

from kestrel.delivery.feedback import reported_checks
from kestrel.delivery.forges import (
    DEFAULT_SYNC_S,
    ForgeSettings,
    forge_host,
    forge_kind,
    forge_settings,
)
from kestrel.protocol.errors import ConfigError
from kestrel.protocol.events import PullRequestOpened, PullRequestSynced

OPENED = PullRequestOpened(
    url="u", number=1, repository="a/b", branch="kestrel/x", base="main", commit="c1"
)


def test_a_failed_check_counts_as_reported_only_for_the_head_it_was_sent_for() -> None:
    nothing_pushed = PullRequestSynced(number=1, failed_checks=("tests",), commit="")
    pushed = PullRequestSynced(number=1, failed_checks=("lint",), commit="c2")

    assert reported_checks([OPENED], "c1") == set()
    assert reported_checks([OPENED, nothing_pushed], "c1") == {"tests"}
    assert reported_checks([OPENED, nothing_pushed, pushed], "c1") == {"tests", "lint"}
    assert reported_checks([OPENED, nothing_pushed, pushed], "c2") == set()
    assert reported_checks([OPENED, pushed], "someone-elses") == set()


@pytest.mark.parametrize(
    ("api", "kind", "host"),
    [
        ("https://api.github.com", "github", "github.com"),
        ("https://ghe.example.com/api/v3", "github", "ghe.example.com"),
        ("https://gitlab.com/api/v4", "gitlab", "gitlab.com"),
        ("https://git.example.com/gitlab/api/v4/", "gitlab", "git.example.com"),
    ],
)
def test_the_forge_is_told_by_its_api_url(api: str, kind: str, host: str) -> None:
    assert (forge_kind(api), forge_host(api)) == (kind, host)


def test_a_server_reads_its_forge_from_its_environment() -> None:
    env = {"KESTREL_FORGE_API": "https://ghe.example.com/api/v3", "GITHUB_TOKEN": "t0ken"}
    found = forge_settings(env)
    assert found == ForgeSettings(
        api_url="https://ghe.example.com/api/v3", token="t0ken", sync_every_s=DEFAULT_SYNC_S
    )
    assert "t0ken" not in repr(found)
    gitlab = {"KESTREL_FORGE_API": "https://gitlab.com/api/v4", "GITLAB_TOKEN": "gl"}
    assert forge_settings({**gitlab, "KESTREL_FORGE_SYNC_S": "0"}).token == "gl"
    assert forge_settings({**gitlab, "KESTREL_FORGE_SYNC_S": "0"}).sync_every_s == 0
    for bad in ("soon", "-1", "nan"):
        with pytest.raises(ConfigError, match="KESTREL_FORGE_SYNC_S"):
            forge_settings({**env, "KESTREL_FORGE_SYNC_S": bad})
