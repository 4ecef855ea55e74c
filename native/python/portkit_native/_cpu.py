"""The CPU check that runs before the extension loads: this build's code may use every feature
its target enables (`_target.py`, written by native/build.rs; x86-64-v3 from the repository's
.cargo/config.toml), and a CPU without one of them would die of SIGILL inside candle's kernels.
Linux tells through /proc/cpuinfo; elsewhere nothing is checked."""

from __future__ import annotations

from pathlib import Path

#: rustc's x86 feature names whose /proc/cpuinfo flag is spelled otherwise
CPUINFO_NAME = {"lzcnt": "abm", "sse3": "pni", "sse4.1": "sse4_1", "sse4.2": "sse4_2", "cmpxchg16b": "cx16"}
#: rustc names with no /proc/cpuinfo flag of their own (implied by the others, or not listed there)
UNLISTED = {"crt-static"}


def cpu_flags(cpuinfo: str) -> set[str] | None:
    """The `flags` of the first processor in a /proc/cpuinfo text; None when it has none."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return None


def missing(arch: str, features: tuple[str, ...], cpuinfo: str | None) -> list[str]:
    """The features of an x86_64 build that this CPU's flags lack ([] when it has them all, or
    when there is nothing to read)."""
    if arch != "x86_64" or cpuinfo is None:
        return []
    flags = cpu_flags(cpuinfo)
    if flags is None:
        return []
    return [f for f in features if f not in UNLISTED and CPUINFO_NAME.get(f, f) not in flags]


def check(arch: str, features: tuple[str, ...], cpuinfo_path: Path = Path("/proc/cpuinfo")) -> None:
    try:
        cpuinfo = cpuinfo_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    lack = missing(arch, features, cpuinfo)
    if lack:
        raise ImportError(
            f"portkit_native was built for CPUs with {', '.join(lack)}, which this CPU lacks: "
            "build it here without the repository's target (RUSTFLAGS='' make native)"
        )
