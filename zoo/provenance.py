"""What a result needs to be reproduced: the zoo's version and commit, and everything that decides
how the arithmetic rounds (torch, the CPU capability its kernels were picked for, the CPU's vendor,
family and model, the BLAS, the device). With the thread count (recorded beside it), a CPU run of
the same commit where all of these are equal gives the same metrics to the last bit; `zoo
reproduce` checks that, and judges a run made elsewhere by a tolerance."""

from __future__ import annotations

import platform
import re
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch

ROUNDING = ("torch_version", "python_version", "device", "cpu", "cpu_capability", "blas")
"""The environment's fields that decide the rounding; with the thread count, all equal means
bit-for-bit reproduction is owed."""


@lru_cache(maxsize=1)
def zoo_commit() -> str | None:
    """The git commit of the zoo's source, `+dirty` when tracked files differ from it; None
    outside a git checkout (an installed wheel)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if dirty else "")


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"{device.type} ({platform.machine()}, {cpu_info().get('model name', 'unknown processor')})"


@lru_cache(maxsize=1)
def cpu_info() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "model name" not in fields and platform.processor():
        fields["model name"] = platform.processor()
    return fields


def cpu_identity() -> str:
    """Vendor, family and model: two CPUs sold under one name (every AMD EPYC generation) differ
    here, and so do their kernels' roundings."""
    info = cpu_info()
    parts = [info.get("vendor_id") or platform.machine(), f"family {info.get('cpu family', '?')}",
             f"model {info.get('model', '?')}", f"stepping {info.get('stepping', '?')}"]
    return " ".join(parts) + f" ({info.get('model name', 'unknown processor')})"


@lru_cache(maxsize=1)
def blas() -> str:
    """The BLAS torch was built with, and its version where torch names it."""
    shown = torch.__config__.show()
    name = re.search(r"BLAS_INFO=(\w+)", shown)
    version = re.search(r"Math Kernel Library Version ([\w.]+)", shown) or re.search(r"OpenBLAS ([\w.]+)", shown)
    return " ".join(part for part in (name and name[1], version and version[1]) if part) or "unknown"


def zoo_version() -> str:
    try:
        return metadata.version("zoo")
    except metadata.PackageNotFoundError:
        return "unknown"


def environment(device: torch.device) -> dict[str, str]:
    return {"zoo_version": zoo_version(), "zoo_commit": zoo_commit() or "unknown", "torch_version": torch.__version__,
            "python_version": platform.python_version(), "device": device_name(torch.device(device)),
            "cpu": cpu_identity(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "blas": blas()}
