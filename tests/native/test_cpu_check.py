"""The wheel's CPU check (portkit_native._cpu): a build for x86-64-v3 refuses a CPU without AVX2
with one line before the extension loads, and verify turns that line into its own (exit 2), not
"not installed"."""

from __future__ import annotations

import importlib.abc
import sys
from pathlib import Path

import pytest

from portkit_native import _cpu, _target

V3 = ("avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "sse4.1", "xsave")
HASWELL = (
    "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 fma cx16 sse4_1 sse4_2 movbe popcnt xsave avx f16c avx2 "
    "bmi1 bmi2 abm\n"
)
SANDY_BRIDGE = "processor\t: 0\nflags\t\t: fpu sse sse2 pni ssse3 cx16 sse4_1 sse4_2 popcnt xsave avx\n"


def test_a_haswell_class_cpu_has_every_v3_feature() -> None:
    assert _cpu.missing("x86_64", V3, HASWELL) == []


def test_an_older_cpu_lacks_avx2_and_fma() -> None:
    assert _cpu.missing("x86_64", V3, SANDY_BRIDGE) == ["avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe"]


def test_nothing_is_checked_off_x86_64_or_without_flags() -> None:
    assert _cpu.missing("aarch64", V3, SANDY_BRIDGE) == []
    assert _cpu.missing("x86_64", V3, "processor\t: 0\n") == []


def test_crt_static_is_no_cpu_flag() -> None:
    """build.rs copies CARGO_CFG_TARGET_FEATURE, which holds `crt-static` on a static target (musl,
    `-C target-feature=+crt-static`): /proc/cpuinfo never lists it, and checking it would refuse
    every CPU."""
    assert _cpu.missing("x86_64", ("avx2", "crt-static"), HASWELL) == []
    assert _cpu.missing("x86_64", (*V3, "crt-static"), HASWELL) == []
    # negative control: the features beside it are still checked
    assert _cpu.missing("x86_64", ("avx2", "crt-static"), SANDY_BRIDGE) == ["avx2"]


def test_check_raises_one_line_naming_what_is_missing(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(SANDY_BRIDGE)
    with pytest.raises(ImportError) as e:
        _cpu.check("x86_64", V3, info)
    assert "avx2" in str(e.value) and "\n" not in str(e.value)
    info.write_text(HASWELL)
    _cpu.check("x86_64", V3, info)  # no error
    _cpu.check("x86_64", V3, tmp_path / "absent")  # nothing to read: no error


def test_this_build_targets_x86_64_v3_and_this_cpu_runs_it() -> None:
    """The repository's .cargo/config.toml took effect (candle's quantized kernels need AVX2 at
    build time), and this machine passed the check (the extension is loaded)."""
    if _target.ARCH == "x86_64":
        assert {"avx2", "fma", "f16c"} <= set(_target.FEATURES)
    assert (
        _cpu.missing(
            _target.ARCH,
            _target.FEATURES,
            Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else None,
        )
        == []
    )


class _RefusingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # noqa: ANN001
        if name == "portkit_native":
            raise ImportError("portkit_native was built for CPUs with avx2, which this CPU lacks: build it here")
        return None


def test_verify_reports_the_cpu_line_not_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    from portkit.verify.candle.native import NativeUnavailable, native

    monkeypatch.delitem(sys.modules, "portkit_native")
    monkeypatch.setattr(sys, "meta_path", [_RefusingFinder(), *sys.meta_path])
    with pytest.raises(NativeUnavailable, match="built for CPUs with avx2"):
        native()
    monkeypatch.setitem(sys.modules, "portkit_native", None)
    with pytest.raises(NativeUnavailable, match="is not installed"):
        native()
