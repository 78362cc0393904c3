"""The peak of the bytes that a process's live allocations hold, for the CPU benchmarks of memory:
peak RSS also counts what malloc keeps after tensors are freed (glibc returns little of it), which
grows step after step and which no estimate of tensor memory can predict. What is sampled here is
what CUDA's allocator reports as `max_memory_allocated` on a GPU.

glibc's mallinfo2 gives the bytes in use in its main arena and in mmapped chunks; a process started
with MALLOC_ARENA_MAX=1 has no other arena, so that is every allocation. A thread samples it every
0.1 ms (torch's ops and autograd's backward run without the GIL), so a peak shorter than that can
be missed. Elsewhere than glibc, nothing is measured (None)."""

from __future__ import annotations

import threading
import time

from zoo.trainer.freed_memory import MallInfo2, glibc

SAMPLE_S = 1e-4
ONE_ARENA = {"MALLOC_ARENA_MAX": "1"}
"""The environment a process measured here is started with."""


def in_use_reader():
    """A function returning the bytes malloc holds for live allocations, or None without glibc's mallinfo2."""
    libc = glibc()
    mallinfo2 = getattr(libc, "mallinfo2", None)
    if mallinfo2 is None:
        return None
    mallinfo2.restype = MallInfo2

    def in_use() -> int:
        info = mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use


class HeapPeak:
    """`with HeapPeak() as peak:` ... `peak.above_start`: the highest bytes in use while inside,
    above those in use on entering (None where it cannot be read)."""

    def __init__(self):
        self.read = in_use_reader()
        self.start = self.highest = 0
        self._stop = threading.Event()

    def __enter__(self) -> HeapPeak:
        if self.read is not None:
            self.start = self.highest = self.read()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.highest = max(self.highest, self.read())
            time.sleep(SAMPLE_S)

    def __exit__(self, *_) -> None:
        if self.read is not None:
            self._stop.set()
            self._thread.join()
            self.highest = max(self.highest, self.read())

    @property
    def above_start(self) -> int | None:
        return None if self.read is None else self.highest - self.start
