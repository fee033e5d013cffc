"""The classifier's checks of disk tools: formatting, wiping, repartitioning, discarding,
secure erase and encryption headers, volume managers, and `shred` of a device."""

from __future__ import annotations

from collections.abc import Callable

from kestrel.policy.classify_files import DISK
from kestrel.policy.classify_scan import Scan, outside, split
from kestrel.policy.shell import SimpleCommand

_FORMATTERS = frozenset({"mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "wipefs"})


def formats(command: SimpleCommand) -> str:
    """`mkfs.*`, `mke2fs`, `mkswap`, `wipefs`: a new file system or none, and the data gone."""
    name = command.name
    if not (name.startswith("mkfs") or name in _FORMATTERS):
        return ""
    flags, _ = split(command.words[1:])
    if any(f in ("--help", "-h", "-V", "--version") for f in flags) and len(command.words) == 2:
        return ""
    lists = not any(f in ("-a", "--all") or f.startswith(("-o", "--offset")) for f in flags)
    if name == "wipefs" and lists and not any(f[1] != "-" and "a" in f for f in flags):
        return ""  # without -a or -o wipefs only lists signatures
    return f"it formats or wipes a disk ({command.text}), destroying its data"


_LISTING = {  # partition tool -> options that only read
    "fdisk": frozenset({"-l", "--list", "-x", "--list-details", "-V", "--version", "-h"}),
    "sfdisk": frozenset({"-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size"})
    | {"-V", "--verify", "-v", "--version", "-h", "--help", "-F", "--list-free", "-r"},
    "parted": frozenset({"-l", "--list", "-v", "--version", "-h", "--help"}),
    "sgdisk": frozenset({"-p", "--print", "-v", "--verify", "-i", "--info", "-O"})
    | {"--print-mbr", "-V", "--version", "-?", "--help"},
    "gdisk": frozenset({"-l"}),
    "cfdisk": frozenset({"-V", "--version", "-h", "--help"}),
}
_PARTED_READS = frozenset({"print", "p", "help", "version", "unit"})


def _partitions(command: SimpleCommand, scan: Scan) -> list[str]:
    name = command.name
    flags, operands = split(command.words[1:])
    only_reads = bool(flags) and all(f.partition("=")[0] in _LISTING[name] for f in flags)
    if name == "parted":
        script = [o.lower() for o in operands[1:]]
        if (only_reads and not script) or (script and all(o in _PARTED_READS for o in script)):
            return []
    elif only_reads or (name == "sgdisk" and not flags):
        return []
    disk = next((o for o in operands if o.startswith("/dev/")), "a disk")
    return [f"it changes the partition table of {disk} ({name}), which can lose its data"]


def _blkdiscard(command: SimpleCommand, scan: Scan) -> list[str]:
    return [f"it discards every block of {_disk(command)} (blkdiscard), erasing it for good"]


_HDPARM_WRITES: tuple[str, ...] = (
    "--security-erase",
    "--trim-sector-ranges",
    "--fwdownload",
    "--write-sector",
)
_HDPARM_WRITES += ("--make-bad-sector", "--dco-restore", "--dco-setmax", "--security-set-pass")


def _hdparm(command: SimpleCommand, scan: Scan) -> list[str]:
    hits = [w for w in command.words[1:] if w.startswith(_HDPARM_WRITES) or w == "-N"]
    if hits:
        return [
            f"it erases or rewrites the drive {_disk(command)} at a low level (hdparm {hits[0]})"
        ]
    return []


_LUKS_WIPES = frozenset({"luksformat", "erase", "lukserase", "lukskillslot", "luksremovekey"})
_LUKS_WIPES |= {"reencrypt"}


def _cryptsetup(command: SimpleCommand, scan: Scan) -> list[str]:
    _, operands = split(command.words[1:])
    verb = next((o for o in operands if o.lower() in _LUKS_WIPES), "")
    if verb:
        return [f"it rewrites or erases the encryption header of {_disk(command)} (cryptsetup "
                f"{verb}), which makes the data unreadable"]  # fmt: skip
    return []


def _shred(command: SimpleCommand, scan: Scan) -> list[str]:
    _, targets = split(command.words[1:], frozenset({"-n", "--iterations", "-s", "--size"}))
    reasons = []
    for target in targets:
        if DISK.fullmatch(target):
            reasons.append(f"it overwrites the device {target} (shred), destroying what it holds")
        elif reason := outside(target, scan, "it shreds", "beyond recovery"):
            reasons.append(reason)
    return reasons


def _badblocks(command: SimpleCommand, scan: Scan) -> list[str]:
    flags, _ = split(command.words[1:])
    if any(f[1] != "-" and "w" in f for f in flags):
        return [f"it writes test patterns over {_disk(command)} (badblocks -w), erasing it"]
    return []


_VOLUME_DROPS = {"zfs": ("destroy",), "zpool": ("destroy", "labelclear")}
_VOLUME_DROPS |= {"btrfs": ("delete",), "mdadm": ("--zero-superblock",)}


def _volumes(command: SimpleCommand, scan: Scan) -> list[str]:
    name = command.name
    if name in ("lvremove", "vgremove", "pvremove"):
        return [f"it deletes a logical volume or volume group ({command.text})"]
    hits = [w for w in command.words[1:] if w in _VOLUME_DROPS[name]]
    if hits:
        return [f"it destroys a volume or its data ({name} {hits[0]})"]
    return []


_NVME_WIPES = frozenset({"format", "sanitize", "delete-ns", "detach-ns"})


def _nvme(command: SimpleCommand, scan: Scan) -> list[str]:
    _, operands = split(command.words[1:])
    if operands[:1] and operands[0] in _NVME_WIPES:
        return [f"it erases an NVMe drive or namespace ({command.text})"]
    return []


def _disk(command: SimpleCommand) -> str:
    return next((w for w in command.words[1:] if w.startswith("/dev/")), "a disk")


CHECKS: dict[str, Callable[[SimpleCommand, Scan], list[str]]] = {
    **dict.fromkeys(_LISTING, _partitions),
    **dict.fromkeys(("lvremove", "vgremove", "pvremove", *_VOLUME_DROPS), _volumes),
    "blkdiscard": _blkdiscard,
    "hdparm": _hdparm,
    "cryptsetup": _cryptsetup,
    "shred": _shred,
    "badblocks": _badblocks,
    "nvme": _nvme,
}
