"""Git URLs that point at the server's own network are refused unless the operator allows them."""

from __future__ import annotations

import pytest

from kestrel.server.intake_hosts import check_git_host, git_host
from kestrel.server.intake_sources import IntakeError


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://Example.com:8443/o/r.git", "example.com"),
        ("ssh://git@example.com/o/r.git", "example.com"),
        ("git@example.com:o/r", "example.com"),
        ("https://[::1]/r", "::1"),
        ("git@[fd00::1]:o/r", "fd00::1"),
    ],
)
def test_the_host_of_each_url_form(url: str, host: str) -> None:
    assert git_host(url) == host


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/r.git",
        "https://localhost/r.git",
        "http://169.254.169.254/latest/meta-data",
        "git@10.1.2.3:o/r",
        "ssh://git@192.168.0.5/o/r",
        "https://[::1]/r",
        "https://[fd00::1]/r",
        "https://0.0.0.0/r",
    ],
)
def test_private_and_local_hosts_are_refused(url: str) -> None:
    with pytest.raises(IntakeError, match="private or local address"):
        check_git_host(url, ())


def test_a_name_that_resolves_to_a_private_address_is_refused() -> None:
    def resolve(host: str) -> list[str]:
        assert host == "git.internal.example"
        return ["93.184.216.34", "10.0.0.7"]  # One public answer does not make up for the other.

    with pytest.raises(IntakeError, match=r"10\.0\.0\.7"):
        check_git_host("https://git.internal.example/r.git", (), resolve)


def test_public_hosts_pass_and_the_operator_may_allow_others() -> None:
    check_git_host("https://github.com/o/r.git", (), lambda host: ["140.82.112.3"])
    check_git_host("https://127.0.0.1:9/r.git", ("127.0.0.1",))
    check_git_host("git@git.corp.example:o/r", ("*.corp.example",))


def test_a_host_that_does_not_resolve_says_so() -> None:
    def resolve(host: str) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(IntakeError, match="cannot be resolved"):
        check_git_host("https://nowhere.invalid/r.git", (), resolve)
