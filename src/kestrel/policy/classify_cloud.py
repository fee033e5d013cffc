"""The classifier's checks of cloud command-line tools: aws, gcloud, gsutil and az. Deleting,
terminating and purging verbs ask; listing, describing and downloading do not."""

from __future__ import annotations

from collections.abc import Callable

from kestrel.policy.classify_infra import hidden_verb
from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand

_AWS_VALUE = frozenset({"--region", "--profile", "--output", "--endpoint-url", "--query"})
_AWS_VALUE |= {"--color", "--ca-bundle", "--cli-read-timeout", "--cli-connect-timeout"}
_AWS_VALUE |= {"--cli-binary-format"}
_AWS_DROPS: tuple[str, ...] = (
    "delete-",
    "terminate-",
    "deregister-",
    "purge-",
    "remove-",
    "batch-delete-",
)
_AWS_DROPS += ("schedule-key-deletion", "disable-key", "revoke-", "reset-", "wipe-")


_AWS_SECRETS = frozenset({"aws_access_key_id", "aws_secret_access_key", "aws_session_token"})


def _aws(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:], _AWS_VALUE)
    if "--dry-run" in flags or "--dryrun" in flags or "help" in operands[:3]:
        return []
    service, op = [*operands, "", ""][:2]
    if hidden := hidden_verb(command, operands[:2]):
        return hidden
    target = operands[2] if len(operands) > 2 else ""
    if service == "configure" and op == "set" and target in _AWS_SECRETS:
        return [f"it overwrites the saved AWS credential {target} (aws configure set)"]
    if service == "s3":
        return _s3(op, target, flags)
    if op.startswith(_AWS_DROPS):
        what = f" {target}" if target else ""
        return [f"it deletes or disables AWS resources (aws {service} {op}{what})"]
    return []


def _s3(op: str, target: str, flags: list[str]) -> list[str]:
    recursive = "--recursive" in flags or "-r" in flags
    if op == "rm" and recursive:
        return [f"it deletes every object under {target} (aws s3 rm --recursive)"]
    if op == "rm":
        return [f"it deletes the S3 object {target} (aws s3 rm)"]
    if op == "rb":
        how = ", with every object in it" if "--force" in flags else ""
        return [f"it deletes the S3 bucket {target}{how} (aws s3 rb)"]
    if op == "sync" and "--delete" in flags:
        return ["it deletes files at the destination that the source lacks (aws s3 sync --delete)"]
    if op == "mv" and recursive:
        return [f"it moves every object under {target}, deleting the originals (aws s3 mv)"]
    return []


_GCLOUD_VALUE = frozenset({"--project", "--account", "--configuration", "--format"})
_GCLOUD_VALUE |= {"--verbosity", "--impersonate-service-account", "--zone", "--region"}
_GCLOUD_VALUE |= {"--filter", "--billing-project", "--flags-file", "--location"}
_GCLOUD_LEAVES = frozenset(
    {"list", "describe", "delete", "create", "update", "rm", "ls", "cp", "mv", "cat", "rsync"}
    | {"ssh", "scp", "deploy", "reset", "stop", "start", "set", "unset", "get", "read", "tail"}
    | {"login", "revoke", "activate", "print-access-token", "browse", "submit", "wait", "info"}
    | {"import", "export", "restart", "resize", "du", "version", "init", "help"}
)
_GCLOUD_PREFIXES = ("get-", "set-", "add-", "remove-", "delete-", "describe-", "list-")


def _gcloud(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, operands = split(command.words[1:], _GCLOUD_VALUE)
    leaf = next(
        (
            i
            for i, o in enumerate(operands)
            if o in _GCLOUD_LEAVES or o.startswith(_GCLOUD_PREFIXES)
        ),
        None,
    )
    if leaf is None:
        return hidden_verb(command, operands)
    if "--help" in flags:
        return []
    path = " ".join(operands[: leaf + 2])
    word = operands[leaf]
    if word == "delete" or word.startswith("delete-"):
        return [f"it deletes Google Cloud resources (gcloud {path})"]
    if word == "rm" and operands[:1] == ["storage"]:
        recursive = any(f in ("-r", "-R", "--recursive") for f in flags)
        return [f"it deletes {'every object under ' if recursive else ''}"
                f"{' '.join(operands[leaf + 1 :]) or 'objects'} (gcloud storage rm)"]  # fmt: skip
    if word == "rsync" and any(f in ("--delete-unmatched-destination-objects",) for f in flags):
        return ["it deletes destination objects that the source lacks (gcloud storage rsync)"]
    if word == "revoke" and operands[:1] == ["auth"]:
        return ["it revokes saved Google Cloud credentials (gcloud auth revoke)"]
    if word == "reset" and "instances" in operands[:leaf]:
        return [f"it hard-resets a running virtual machine (gcloud {path})"]
    return []


_GSUTIL_VALUE = frozenset({"-o", "-h", "-u", "-p"})


def _gsutil(command: SimpleCommand, scan: Scan) -> list[str]:
    args = list(command.words[1:])
    lead, i = [], 0
    while i < len(args) and args[i].startswith("-"):  # options of gsutil itself
        lead.append(args[i])
        i += 2 if args[i] in _GSUTIL_VALUE else 1
    flags, operands = split(args[i:])
    sub = operands[0] if operands else ""
    target = " ".join(operands[1:]) or "objects"
    if sub in ("rm", "del", "delete", "remove"):
        recursive = any(f in ("-r", "-R", "-a") for f in flags)
        return [f"it deletes {'every object under ' if recursive else ''}{target} (gsutil rm)"]
    if sub == "rb":
        return [f"it deletes the bucket {target} (gsutil rb)"]
    if sub == "rsync" and any(f[1] != "-" and "d" in f for f in flags):
        return ["it deletes destination files that the source lacks (gsutil rsync -d)"]
    return []


_AZ_DROPS = frozenset({"delete", "delete-batch", "purge", "destroy"})


_AZ_VALUE = frozenset({"-n", "--name", "-g", "--resource-group", "-o", "--output", "--query"})
_AZ_VALUE |= {"--subscription", "--ids", "-l", "--location"}


def _az(command: SimpleCommand, scan: Scan) -> list[str]:
    _, operands = split(command.words[1:], _AZ_VALUE)
    path = operands[:5]
    hit = next((w for w in path if w in _AZ_DROPS or w.startswith("delete-")), "")
    if hit and path[:1] != ["config"]:
        return [f"it deletes Azure resources (az {' '.join(path[: path.index(hit) + 1])})"]
    return []


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    "aws": _aws,
    "gcloud": _gcloud,
    "gsutil": _gsutil,
    "az": _az,
}
