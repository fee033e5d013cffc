"""A seccomp filter for sandboxed commands, assembled in pure Python as classic BPF.

bubblewrap loads it (`--seccomp FD`) after it has built the sandbox, so the calls it needs for
that (mount, pivot_root, unshare) are refused only to the command and its children.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Arch = Literal["x86_64", "aarch64"]

AUDIT_ARCH: dict[Arch, int] = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
"""The `seccomp_data.arch` value of each supported architecture (64-bit little endian)."""

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

TIOCSTI = 0x5412
TIOCLINUX = 0x541C
X32_SYSCALL_BIT = 0x40000000
AF_VSOCK = 40
"""The socket family of virtual machine sockets, which a network namespace does not confine."""

# Every CLONE_NEW* flag: a command may fork and start threads, never build new namespaces.
CLONE_NAMESPACE_FLAGS = 0x00000080 | 0x00020000 | 0x7E000000

# Classic BPF opcodes (linux/filter.h) used below.
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

# Offsets into struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6] (little endian).
_NR, _ARCH = 0, 4
_ARG0_LOW, _ARG1_LOW = 16, 24

DENIED: tuple[str, ...] = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "pivot_root",
    "swapon",
    "swapoff",
    "reboot",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "unshare",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "mount_setattr",
)
"""System calls that fail with EPERM: tracing, kernel keys, kernel extension, mounts, namespaces."""

# fmt: off
SYSCALLS: dict[Arch, dict[str, int]] = {
    "x86_64": {
        "ioctl": 16, "socket": 41, "clone": 56, "ptrace": 101, "pivot_root": 155, "mount": 165,
        "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
        "delete_module": 176, "kexec_load": 246, "add_key": 248, "request_key": 249,
        "keyctl": 250, "unshare": 272, "perf_event_open": 298, "name_to_handle_at": 303,
        "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
        "process_vm_writev": 311, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
        "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "clone3": 435, "mount_setattr": 442,
    },
    "aarch64": {
        "ioctl": 29, "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97,
        "kexec_load": 104, "init_module": 105, "delete_module": 106, "ptrace": 117,
        "reboot": 142, "socket": 198, "add_key": 217, "request_key": 218, "keyctl": 219,
        "clone": 220,
        "swapon": 224, "swapoff": 225, "perf_event_open": 241, "name_to_handle_at": 264,
        "open_by_handle_at": 265, "setns": 268, "process_vm_readv": 270,
        "process_vm_writev": 271, "finit_module": 273, "bpf": 280, "userfaultfd": 282,
        "kexec_file_load": 294, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "clone3": 435, "mount_setattr": 442,
    },
}
# fmt: on
"""System call numbers of the calls the filter names, per architecture."""


@dataclass(frozen=True, slots=True)
class Insn:
    """One BPF instruction; a jump names its targets by label, resolved when assembled."""

    code: int
    k: int = 0
    jt: str | None = None
    jf: str | None = None
    label: str | None = None


def host_arch() -> Arch | None:
    """This machine's architecture if the filter supports it, else None."""
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x86_64"
    if machine in ("aarch64", "arm64"):
        return "aarch64"
    return None


def program(arch: Arch) -> list[Insn]:
    """The filter for `arch` as labelled instructions (see `assemble`)."""
    nrs = SYSCALLS[arch]
    insns = [
        Insn(_LD_W_ABS, _ARCH),
        Insn(_JEQ_K, AUDIT_ARCH[arch], jf="kill"),
        Insn(_LD_W_ABS, _NR),
    ]
    if arch == "x86_64":
        # The x32 ABI reuses this arch value with the high bit set on every number.
        insns.append(Insn(_JGE_K, X32_SYSCALL_BIT, jt="deny"))
    insns += [Insn(_JEQ_K, nrs[name], jt="deny") for name in DENIED]
    insns += [
        Insn(_JEQ_K, nrs["ioctl"], jt="ioctl"),
        Insn(_JEQ_K, nrs["clone"], jt="clone"),
        Insn(_JEQ_K, nrs["socket"], jt="socket"),
        # clone3 passes its flags in memory a filter cannot read: libc falls back to clone.
        Insn(_JEQ_K, nrs["clone3"], jt="enosys"),
        Insn(_RET_K, SECCOMP_RET_ALLOW),
        # The kernel reads an ioctl request as 32 bits, so only the low word is compared.
        Insn(_LD_W_ABS, _ARG1_LOW, label="ioctl"),
        Insn(_JEQ_K, TIOCSTI, jt="deny"),
        Insn(_JEQ_K, TIOCLINUX, jt="deny"),
        Insn(_RET_K, SECCOMP_RET_ALLOW),
        Insn(_LD_W_ABS, _ARG0_LOW, label="clone"),
        Insn(_JSET_K, CLONE_NAMESPACE_FLAGS, jt="deny"),
        Insn(_RET_K, SECCOMP_RET_ALLOW),
        # The family is an int: only the low word counts.
        Insn(_LD_W_ABS, _ARG0_LOW, label="socket"),
        Insn(_JEQ_K, AF_VSOCK, jt="deny"),
        Insn(_RET_K, SECCOMP_RET_ALLOW),
        Insn(_RET_K, SECCOMP_RET_ERRNO | errno.EPERM, label="deny"),
        Insn(_RET_K, SECCOMP_RET_ERRNO | errno.ENOSYS, label="enosys"),
        Insn(_RET_K, SECCOMP_RET_KILL_PROCESS, label="kill"),
    ]
    return insns


def assemble(insns: Sequence[Insn]) -> bytes:
    """Encode instructions as `struct sock_filter` records, resolving labels to jump offsets."""
    where = {insn.label: i for i, insn in enumerate(insns) if insn.label is not None}
    out = bytearray()
    for i, insn in enumerate(insns):
        jt = _offset(where, i, insn.jt)
        jf = _offset(where, i, insn.jf)
        out += struct.pack("<HBBI", insn.code, jt, jf, insn.k)
    return bytes(out)


def _offset(where: dict[str, int], at: int, label: str | None) -> int:
    if label is None:
        return 0  # fall through to the next instruction
    distance = where[label] - at - 1
    if not 0 <= distance <= 255:
        raise ValueError(f"jump to {label!r} is out of reach of a classic BPF jump")
    return distance


def filter_bytes(arch: Arch | None = None) -> bytes:
    """The assembled filter for `arch` (this machine's by default), ready for `--seccomp`."""
    chosen = arch or host_arch()
    if chosen is None:
        raise OSError(f"no seccomp filter for architecture {platform.machine()!r}")
    return assemble(program(chosen))
