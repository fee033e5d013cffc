"""The seccomp program and the limit helpers, checked as values (no sandbox needed)."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import pytest

from kestrel.sandbox import seccomp
from kestrel.sandbox.limits import Limits, join_cgroups_argv, ulimit_script


def run_filter(code: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """A tiny interpreter for the BPF subset the filter uses, over one `seccomp_data`."""
    padded = (*args, 0, 0, 0, 0, 0, 0)[:6]
    data = struct.pack("<iIQ6Q", nr, arch, 0, *padded)
    insns = [struct.unpack("<HBBI", code[i : i + 8]) for i in range(0, len(code), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns)):
        op, jt, jf, k = insns[pc]
        if op == 0x20:
            acc = struct.unpack_from("<I", data, k)[0]
        elif op == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[op]
            pc += jt if taken else jf
        pc += 1
    raise AssertionError("the filter ran off its end")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_denied_calls_get_eperm_and_others_pass(arch: seccomp.Arch) -> None:
    code = seccomp.filter_bytes(arch)
    audit = seccomp.AUDIT_ARCH[arch]
    nrs = seccomp.SYSCALLS[arch]
    eperm = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
    for name in seccomp.DENIED:
        assert run_filter(code, nrs[name], audit) == eperm, name
    assert run_filter(code, 0, audit) == seccomp.SECCOMP_RET_ALLOW
    assert run_filter(code, nrs["clone3"], audit) == seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS


def test_ioctl_is_refused_only_for_terminal_injection() -> None:
    code = seccomp.filter_bytes("x86_64")
    audit, ioctl = seccomp.AUDIT_ARCH["x86_64"], 16
    eperm = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
    assert run_filter(code, ioctl, audit, (1, seccomp.TIOCSTI)) == eperm
    # The kernel ignores the high word of the request, so the filter must too.
    assert run_filter(code, ioctl, audit, (1, (1 << 32) | seccomp.TIOCSTI)) == eperm
    assert run_filter(code, ioctl, audit, (1, seccomp.TIOCLINUX)) == eperm
    assert run_filter(code, ioctl, audit, (1, 0x5401)) == seccomp.SECCOMP_RET_ALLOW


def test_clone_may_fork_but_not_make_namespaces() -> None:
    code = seccomp.filter_bytes("x86_64")
    audit = seccomp.AUDIT_ARCH["x86_64"]
    assert run_filter(code, 56, audit, (0x01200011,)) == seccomp.SECCOMP_RET_ALLOW
    assert run_filter(code, 56, audit, (0x10000000,)) == seccomp.SECCOMP_RET_ERRNO | errno.EPERM


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_vsock_sockets_are_refused_and_other_families_pass(arch: seccomp.Arch) -> None:
    code = seccomp.filter_bytes(arch)
    audit, socket_nr = seccomp.AUDIT_ARCH[arch], seccomp.SYSCALLS[arch]["socket"]
    eperm = seccomp.SECCOMP_RET_ERRNO | errno.EPERM
    assert run_filter(code, socket_nr, audit, (seccomp.AF_VSOCK, 1)) == eperm
    # The kernel reads the family as an int, so a set high word must not slip past.
    assert run_filter(code, socket_nr, audit, ((1 << 32) | seccomp.AF_VSOCK, 1)) == eperm
    for family in (1, 2, 10, 16):  # unix, inet, inet6, netlink
        assert run_filter(code, socket_nr, audit, (family, 1)) == seccomp.SECCOMP_RET_ALLOW


def test_foreign_architectures_and_x32_calls_are_stopped() -> None:
    code = seccomp.filter_bytes("x86_64")
    assert run_filter(code, 0, 0x40000003) == seccomp.SECCOMP_RET_KILL_PROCESS
    x32_read = seccomp.X32_SYSCALL_BIT | 0
    assert run_filter(code, x32_read, seccomp.AUDIT_ARCH["x86_64"]) != seccomp.SECCOMP_RET_ALLOW


def test_jumps_out_of_reach_are_refused() -> None:
    far = [seccomp.Insn(0x15, 1, jt="end"), *[seccomp.Insn(0x06)] * 300]
    with pytest.raises(ValueError, match="out of reach"):
        seccomp.assemble([*far, seccomp.Insn(0x06, label="end")])


def test_ulimits_cover_files_processes_and_optionally_memory() -> None:
    limits = Limits(memory_bytes=1 << 30, max_processes=9, file_size_bytes=1 << 20, open_files=7)
    assert ulimit_script(limits, address_space=False).startswith("ulimit -c 0 -f 1024 -n 7 -u 9 ")
    assert "-v 1048576" in ulimit_script(limits, address_space=True)


def test_the_cgroup_wrapper_joins_before_exec() -> None:
    argv = join_cgroups_argv([Path("/cg/a/cgroup.procs")], ["bwrap", "x"])
    assert argv[:2] == ["/bin/sh", "-c"] and argv[-3:] == ["/cg/a/cgroup.procs", "bwrap", "x"]
    assert join_cgroups_argv([], ["bwrap"]) == ["bwrap"]
