"""A seccomp filter for sandboxes, compiled by libseccomp and handed to ``bwrap --seccomp``.

Dropped capabilities already make most of these calls fail; the filter is the second wall,
and it also closes what capabilities do not: ``ptrace`` and ``process_vm_readv`` on a
process of the same user (the tmux control loop), the kernel's keyring, eBPF, perf events,
``io_uring`` and new namespaces. Denied calls fail with ``EPERM`` as they would for an
unprivileged user; ``clone3`` fails with ``ENOSYS`` so the C library falls back to
``clone``, whose namespace flags the filter can see (``clone3`` passes them in memory).
Syscalls of other architectures (the 32-bit ABI, a classic way around filters) are killed
by libseccomp's default bad-architecture action.

The filter is compiled by libseccomp, never written by hand: through its official Python
bindings (``seccomp``, Debian's python3-seccomp) when importable, else through
``pyseccomp`` (PyPI, the same API over the system's ``libseccomp.so.2`` by ctypes), a
dependency of simgym on Linux. Where neither loads, :func:`seccomp_problem` says why and
sandboxes run without the filter.
"""

from __future__ import annotations

import errno
import os
import tempfile
from functools import lru_cache
from types import ModuleType

# Calls no command in an agent's sandbox needs, each a way to reach the kernel or another
# process that the namespaces and dropped capabilities are meant to close.
DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "mount",
    "umount2",
    "pivot_root",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
)
# clone(2) flags that make new namespaces (CLONE_NEWNS .. CLONE_NEWNET, CLONE_NEWCGROUP,
# CLONE_NEWTIME): a fork with any of them is refused, a plain fork or thread is not.
_NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)


def _library() -> tuple[ModuleType | None, str]:
    try:
        import seccomp as library  # type: ignore[import-not-found]  # libseccomp's own

        return library, ""
    except ImportError:
        pass
    try:
        import pyseccomp as library  # type: ignore[import-untyped]

        return library, ""
    except (ImportError, OSError, AttributeError) as exc:  # no libseccomp.so.2 on the host
        return None, f"libseccomp is not usable from Python ({exc})"


@lru_cache(maxsize=1)
def _compiled() -> tuple[bytes | None, str]:
    library, why = _library()
    if library is None:
        return None, why
    try:
        rules = library.SyscallFilter(defaction=library.ALLOW)
        for name in DENIED:
            try:
                rules.add_rule(library.ERRNO(errno.EPERM), name)
            except (RuntimeError, ValueError, OSError):
                continue  # a call this kernel or libseccomp version does not know
        rules.add_rule(library.ERRNO(errno.ENOSYS), "clone3")
        for flag in _NAMESPACE_FLAGS:
            rules.add_rule(
                library.ERRNO(errno.EPERM), "clone", library.Arg(0, library.MASKED_EQ, flag, flag)
            )
        with tempfile.TemporaryFile() as handle:
            rules.export_bpf(handle)
            handle.seek(0)
            return handle.read(), ""
    except Exception as exc:  # noqa: BLE001  (any library failure means: no filter)
        return None, f"libseccomp could not compile the filter: {exc}"


def seccomp_problem() -> str | None:
    """Why sandboxes run without the seccomp filter here (None when they have it)."""
    program, why = _compiled()
    return None if program is not None else why


def filter_fd() -> int | None:
    """A new file descriptor holding the compiled filter, read from its start, for one
    ``bwrap --seccomp FD`` (bwrap reads it to the end); None without a filter. The caller
    passes it to the child and closes it after the spawn."""
    program, _ = _compiled()
    if program is None:
        return None
    fd = os.memfd_create("simgym-seccomp", 0)  # inheritable only where passed (pass_fds)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
