"""Freed memory kept for the next step. glibc hands a freed block above its mmap threshold (at most
32 MiB) back to the system at once, so a step's large tensors (a batch's logits: 131 MB at 128
rows of 64 tokens over 4,000 words) are mapped and zero-filled again at every step: at Multi30k's
size, on one thread, 13.7 s of a 65.6 s early window was system time. While a run trains, such blocks
stay on the heap for reuse, as torch's CUDA allocator keeps its blocks; when it ends they go back.
The same bits are computed. Elsewhere than glibc, where the user set glibc's malloc variables, or
with ZOO_KEEP_FREED_MEMORY=0, nothing is changed."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
"""mallopt's parameters (malloc.h)."""
GLIBC_DEFAULTS = {M_MMAP_MAX: 65536, M_TRIM_THRESHOLD: 128 * 1024}
"""glibc's defaults, given back when the last run ends."""
WHILE_TRAINING = {M_MMAP_MAX: 0, M_TRIM_THRESHOLD: -1}
"""While a run trains: no block is mapped on its own, and the heap's free top is never trimmed (-1)."""
USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_")
"""glibc's environment variables for the same settings: whoever set one decides."""
OPT_OUT = "ZOO_KEEP_FREED_MEMORY"
"""Set to 0, glibc keeps its own behaviour (a benchmark's baseline; a process short of memory)."""


class MallInfo2(ctypes.Structure):
    """glibc's struct mallinfo2 (2.33 and later): what its allocator holds, in bytes."""
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def glibc() -> ctypes.CDLL | None:
    """The C library this process runs on, if it is glibc (mallopt and malloc_trim are its own)."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version, libc.mallopt, libc.malloc_trim  # noqa: B018 (each raises AttributeError elsewhere)
    except (OSError, AttributeError):
        return None
    return libc


def user_decides() -> bool:
    return (os.environ.get(OPT_OUT) == "0" or any(name in os.environ for name in USER_SETTINGS)
            or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""))


_lock = threading.Lock()
_runs = 0


@contextmanager
def freed_memory_kept() -> Iterator[bool]:
    """Keep freed large blocks on the heap while the body runs (nested or concurrent runs share one
    setting; the last to end gives it back and trims the heap). Yields whether it was kept."""
    global _runs
    libc = None if user_decides() else glibc()
    if libc is None:
        yield False
        return
    with _lock:
        if _runs == 0:
            for parameter, value in WHILE_TRAINING.items():
                libc.mallopt(parameter, ctypes.c_int(value))
        _runs += 1
    try:
        yield True
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0:
                for parameter, value in GLIBC_DEFAULTS.items():
                    libc.mallopt(parameter, ctypes.c_int(value))
                libc.malloc_trim(ctypes.c_size_t(0))
