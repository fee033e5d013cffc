"""The classifier's checks of container engines (docker, podman, nerdctl, compose): pruning and
removing data, and containers that get the host (`--privileged`, `-v /:/host`, `--pid=host`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kestrel.policy.classify_files import DISK, home_secret
from kestrel.policy.classify_scan import Scan, split
from kestrel.policy.shell import SimpleCommand

_ENGINE_VALUE = frozenset({"-H", "--host", "--context", "-c", "--config", "-l", "--log-level"})
_GROUPS = frozenset({"container", "image", "volume", "network", "system", "builder", "buildx"})
_PRUNES = {
    "system": "every stopped container, unused network and unused image",
    "volume": "every volume no container uses, with its data",
    "container": "every stopped container",
    "network": "every network no container uses",
}


def _engine(command: SimpleCommand, scan: Scan) -> list[str]:
    tool = command.name
    _, operands = split(command.words[1:], _ENGINE_VALUE)
    if not operands:
        return []
    group, sub = ("", operands[0]) if operands[0] not in _GROUPS else (operands[0], "")
    if group:
        sub = operands[1] if len(operands) > 1 else ""
    args = command.words[command.words.index(sub) + 1 :] if sub in command.words else ()
    flags, _ = split(args)
    if "--help" in flags:
        return []
    if sub == "compose":
        return _compose(tool, args)
    return _removals(tool, group, sub, flags) + _host_access(tool, sub, args)


def _removals(tool: str, group: str, sub: str, flags: Sequence[str]) -> list[str]:
    every = any(f in ("-a", "--all") or (f[1] != "-" and "a" in f) for f in flags)
    if sub == "prune" and group in _PRUNES:
        what = _PRUNES[group]
        if group == "system" and (every or "--volumes" in flags):
            what = "every image, stopped container and network" + (
                " and every unused volume with its data" if "--volumes" in flags else ""
            )
        return [f"it deletes {what} ({tool} {group} prune)"]
    if sub == "prune" and group == "image" and every:
        return [f"it deletes every image no container uses ({tool} image prune -a)"]
    if group == "volume" and sub in ("rm", "remove"):
        return [f"it deletes container volumes and the data in them ({tool} volume rm)"]
    forced = any(f in ("-f", "--force") or (f[1] != "-" and "f" in f) for f in flags)
    volumes = any(f in ("-v", "--volumes") or (f[1] != "-" and "v" in f) for f in flags)
    if (sub == "rm" and group in ("", "container")) or (sub == "remove" and group == "container"):
        if forced:
            return [f"it force-removes containers, running ones included ({tool} rm -f)"]
        if volumes:
            return [f"it removes containers with their volumes ({tool} rm -v)"]
    return []


def _compose(tool: str, args: Sequence[str]) -> list[str]:
    flags, operands = split(args, frozenset({"-f", "--file", "-p", "--project-name"}))
    sub = operands[0] if operands else ""
    if sub == "down" and any(f in ("-v", "--volumes") for f in flags):
        return [f"it deletes the project's volumes and their data ({tool} compose down -v)"]
    if sub == "rm" and any(f in ("-v", "--volumes") for f in flags):
        return [f"it removes the project's containers with their volumes ({tool} compose rm -v)"]
    return []


def _docker_compose(command: SimpleCommand, scan: Scan) -> list[str]:
    return _compose(command.name, command.words[1:])


_SENSITIVE = frozenset({"/", "/etc", "/root", "/home", "/proc", "/sys", "/dev", "/boot", "/var"})
_SENSITIVE |= {"/usr", "/var/lib/docker", "/run", "~", "$HOME", "/lib", "/bin", "/sbin"}
_SENSITIVE_UNDER = ("/etc/", "/root/", "/boot/", "/dev/", "/proc/", "/sys/")
_SOCKETS = ("docker.sock", "podman.sock", "containerd.sock")


def _host_access(tool: str, sub: str, args: Sequence[str]) -> list[str]:
    """What a new container gets of the host: every device, its processes, its files."""
    if sub not in ("run", "create", "exec"):
        return []
    reasons = []
    for option, value in _options(args):
        if option == "--privileged" and value in ("", "true"):
            reasons.append(f"it starts a privileged container, with full access to the host "
                           f"({tool} {sub} --privileged)")  # fmt: skip
        elif option in ("--pid", "--userns", "--ipc", "--uts") and value == "host":
            reasons.append(f"it shares the host's {option[2:]} namespace with the container "
                           f"({option}=host)")  # fmt: skip
        elif option == "--cap-add" and value.upper().removeprefix("CAP_") in ("ALL", "SYS_ADMIN"):
            reasons.append(f"it gives the container {value}, enough to take over the host")
        elif option == "--security-opt" and ("unconfined" in value or value == "label=disable"):
            reasons.append(f"it turns off the container's confinement (--security-opt {value})")
        elif option == "--device" and DISK.match(value):
            reasons.append(f"it gives the container the host's disk {value.split(':')[0]}")
        elif option in ("-v", "--volume", "--mount") and (source := _mounted(option, value)):
            reasons.append(f"it mounts the host's {source} into the container ({option} {value})")
    return reasons


def _options(args: Sequence[str]) -> list[tuple[str, str]]:
    """(option, value) pairs of a run command line: `--pid=host`, `--pid host`, `-v/:/x`."""
    takes = {"--pid", "--userns", "--ipc", "--uts", "--cap-add", "--security-opt", "-v"}
    takes |= {"--volume", "--mount", "--device"}
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("-v") and len(arg) > 2 and not arg.startswith("--"):
            out.append(("-v", arg[2:].removeprefix("=")))
        elif eq and name in takes:
            out.append((name, value))
        elif arg in takes and i + 1 < len(args):
            out.append((arg, args[i + 1]))
            i += 1
        elif arg.startswith("--privileged"):
            out.append(("--privileged", value))
        i += 1
    return out


def _mounted(option: str, value: str) -> str:
    """The sensitive host path a `-v`/`--mount` value binds, "" when it binds none."""
    if option == "--mount":
        fields = dict(f.partition("=")[::2] for f in value.split(","))
        source = fields.get("source") or fields.get("src") or ""
        readonly = "readonly" in fields or "ro" in fields
    else:
        parts = value.split(":")
        source = parts[0] if len(parts) > 1 else ""
        readonly = len(parts) > 2 and "ro" in parts[2].split(",")
    source = source.rstrip("/") or ("/" if source else "")
    if source.endswith(_SOCKETS):
        return f"engine socket {source}, which controls the host"
    if held := home_secret(source):
        return f"{source} ({held.removeprefix('which holds ')})"
    if not readonly and (source in _SENSITIVE or source.startswith(_SENSITIVE_UNDER)):
        return f"{source} writable"
    return ""


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    "docker": _engine,
    "podman": _engine,
    "nerdctl": _engine,
    "docker-compose": _docker_compose,
    "podman-compose": _docker_compose,
}
