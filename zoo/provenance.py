"""What a result needs to be reproduced: the zoo's version and commit, torch's version, the device.
With the thread count (recorded beside it), a CPU run of the same commit gives the same metrics
to the last bit; `zoo reproduce` checks that."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import torch


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
    return f"{device.type} ({platform.machine()}, {cpu_model()})"


@lru_cache(maxsize=1)
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown processor"


def zoo_version() -> str:
    try:
        return metadata.version("zoo")
    except metadata.PackageNotFoundError:
        return "unknown"


def environment(device: torch.device) -> dict[str, str]:
    return {"zoo_version": zoo_version(), "zoo_commit": zoo_commit() or "unknown", "torch_version": torch.__version__,
            "python_version": platform.python_version(), "device": device_name(torch.device(device))}
