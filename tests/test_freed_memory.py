"""Freed large blocks stay on the heap while a run trains and go back when it ends; a user who set
glibc's malloc variables keeps them. Read from glibc's own accounting (mallinfo2), on glibc only:
elsewhere the zoo changes nothing and there is nothing to read."""

import os

import pytest
import torch

from zoo.trainer.freed_memory import MallInfo2, freed_memory_kept, glibc

LIBC = glibc()
pytestmark = pytest.mark.skipif(LIBC is None or not hasattr(LIBC, "mallinfo2"),
                                reason="glibc 2.33 or later only: elsewhere freed_memory_kept changes nothing")
BLOCK = 64 * 2**20
"""Above glibc's largest mmap threshold (32 MiB): mapped on its own unless kept."""


def mallinfo() -> MallInfo2:
    LIBC.mallinfo2.restype = MallInfo2
    return LIBC.mallinfo2()


def mapped_for_a_block() -> int:
    """The bytes mapped on their own while one block lives, larger than BLOCK and than all the free
    memory the heap holds (a free chunk of the heap would serve it otherwise, kept or not); never
    touched, so it costs no memory."""
    size = BLOCK + mallinfo().fordblks
    before = mallinfo().hblkhd
    block = torch.empty(size, dtype=torch.uint8)
    grown = mallinfo().hblkhd - before
    del block
    return grown


def test_a_large_block_is_taken_from_the_heap_while_kept_and_mapped_again_after():
    assert mapped_for_a_block() >= BLOCK
    with freed_memory_kept() as kept:
        assert kept and mapped_for_a_block() == 0
        with freed_memory_kept():  # a nested run shares the setting ...
            pass
        assert mapped_for_a_block() == 0  # ... and its end does not give it back under the outer one
    assert mapped_for_a_block() >= BLOCK


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_the_freed_memory_goes_back_to_the_system_when_the_last_run_ends():
    with freed_memory_kept():
        held = [torch.ones(BLOCK, dtype=torch.uint8) for _ in range(3)]  # touched: resident
        del held
        kept = resident_bytes()
    assert resident_bytes() < kept - 2 * BLOCK


@pytest.mark.parametrize("variable, value", [("MALLOC_MMAP_MAX_", "65536"), ("GLIBC_TUNABLES", "glibc.malloc.check=0"),
                                             ("ZOO_KEEP_FREED_MEMORY", "0")])
def test_a_users_own_malloc_setting_decides(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with freed_memory_kept() as kept:
        assert not kept and mapped_for_a_block() >= BLOCK

