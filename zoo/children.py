"""How a process the zoo started ended, in words a user can act on: a signal by its name and what
it usually means, never Python's bare negative return code ("exit code -4")."""

from __future__ import annotations

import signal

MEANINGS = {
    signal.SIGILL: "an instruction this CPU lacks",
    signal.SIGKILL: "stopped from outside, often by the kernel's out-of-memory killer",
    signal.SIGSEGV: "a crash in native code",
    signal.SIGBUS: "a crash in native code, or a file it had mapped shrank",
    signal.SIGABRT: "native code aborted",
}
"""What a signal that ends a training process usually says about its cause."""

CAPABILITY_NAMES = {"avx2": "AVX2", "avx512": "AVX-512", "default": "the default (no vector extension)"}


def capability_name(capability: str) -> str:
    """A torch CPU capability (ATEN_CPU_CAPABILITY's spelling) as people write it."""
    return CAPABILITY_NAMES.get(capability.lower(), capability.upper())


def ended(code: int, cpu_capability: str | None = None) -> str:
    """A child's return code in words: `exit code N`, or `killed by SIGNAME: what it means`; a
    SIGILL under a CPU capability the child was told to use names that capability."""
    if code >= 0:
        return f"exit code {code}"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"killed by signal {-code}"
    if sig == signal.SIGILL and cpu_capability:
        return (f"killed by SIGILL: this CPU lacks {capability_name(cpu_capability)} "
                f"(ATEN_CPU_CAPABILITY={cpu_capability})")
    meaning = MEANINGS.get(sig)
    return f"killed by {sig.name}" + (f": {meaning}" if meaning else "")
