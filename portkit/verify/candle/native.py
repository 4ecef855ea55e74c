"""The candle side: portkit_native, imported lazily so that lint never needs the wheel."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from portkit.families import Family

BUILD_HINT = "build it with `make native` (maturin build --release -m native/Cargo.toml, then pip install the wheel)"


class NativeUnavailable(RuntimeError):
    """The portkit_native wheel is not installed, or refuses this machine's CPU."""


def native() -> Any:
    try:
        import portkit_native
    except ModuleNotFoundError as e:
        raise NativeUnavailable(f"portkit_native is not installed: {BUILD_HINT}") from e
    except ImportError as e:  # installed, but built for CPU features this one lacks (portkit_native._cpu)
        raise NativeUnavailable(str(e).splitlines()[0]) from e
    return portkit_native


def native_for_run() -> Any:
    """`native()` for a run that needs candle: no runner is verify's bad input (one line, exit 2)."""
    from portkit.verify.errors import BadInput

    try:
        return native()
    except NativeUnavailable as e:
        raise BadInput(str(e)) from None


def crate_versions(pn: Any) -> dict[str, str]:
    """The candle release and the tokenizers crate `pn` (portkit_native) was built on, as its Cargo.lock resolved
    them."""
    info = pn.build_info()
    return {"candle": str(info["candle_version"]), "tokenizers": str(info.get("tokenizers_version", "?"))}


#: What each candle load waits for first, and what each release of candle's memory tells (`holding_back`).
_before_load: list[Callable[[], None]] = []
_after_release: list[Callable[[], bool]] = []


@contextmanager
def holding_back(wait: Callable[[], None], released: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """Within: `wait()` before each runner or GGUF loads, `released()` once a run's weights are
    dropped (`release_memory`; True: it hands the freed heap back to the system itself,
    later). `portkit verify A B` alternates with transformers there
    (`portkit.verify.reference.alternation`): candle's weights and another model's transformers
    model are never held at once."""
    _before_load.append(wait)
    _after_release.append(released)
    try:
        yield
    finally:
        _before_load.remove(wait)
        _after_release.remove(released)


def _loading(weight_files: Sequence[Path] = ()) -> None:
    """What a load waits for first (`holding_back`); nothing when it is on weights already kept
    (`weights_kept`): it allocates none."""
    if weight_files and _kept == [str(p) for p in weight_files] and native().kept_tensors():
        return
    for wait in list(_before_load):
        wait()


#: The weight files `weights_kept` keeps the loaded tensors of now.
_kept: list[str] | None = None


@contextmanager
def weights_kept(weight_files: Sequence[Path]) -> Iterator[None]:
    """Within: the runners loading `weight_files` share the tensors the first of them loaded
    (`portkit_native.keep_weights`), so that verify's first counterfactual (config.json with a
    finding's patch) reuses the run as written's instead of reading and converting the checkpoint
    again: 0.3-1.1 s of a 135M f32 checkpoint's run on two cores. The tensors stay resident
    between the runs, as much memory as one run holds; they are dropped on leaving."""
    global _kept
    pn = native()
    _kept = [str(p) for p in weight_files]
    pn.keep_weights(_kept)
    try:
        yield
    finally:
        _kept = None
        pn.keep_weights(None)
        release_memory()


def release_memory() -> None:
    """candle's freed weights back to the system before the next load (`portkit_native.release_memory`),
    unless `portkit verify A B`'s alternation with transformers hands them back later (`holding_back`)."""
    try:
        from portkit_native import release_memory as native_release
    except ImportError:  # a run without the wheel never loaded weights
        return
    if not released():
        native_release()


def released() -> bool:
    """candle's weights are dropped (`release_memory`): whether a holder trims the heap later."""
    return any([tell() for tell in list(_after_release)])


def load_llama(
    weight_files: Sequence[Path],
    config_json: str,
    *,
    dtype: str = "f32",
    device: str = "cpu",
    cache_dtype: str | None = None,
    use_flash_attn: bool = False,
) -> Any:
    """A `portkit_native.LlamaRunner`; `config_json` is passed as text so a patched config can run."""
    _loading(weight_files)
    return native().LlamaRunner(
        [str(p) for p in weight_files],
        config_json,
        dtype=dtype,
        cache_dtype=cache_dtype,
        device=device,
        use_flash_attn=use_flash_attn,
    )


def load_family(
    family: str,
    weight_files: Sequence[Path],
    config_json: str,
    *,
    dtype: str = "f32",
    device: str = "cpu",
    cache_dtype: str | None = None,
) -> Any:
    """A `portkit_native.FamilyRunner` over candle's own `models::{family}` (a key of
    `portkit_native.families()`); `config_json` is text so a patched config can run."""
    _loading(weight_files)
    return native().FamilyRunner(
        family, [str(p) for p in weight_files], config_json, dtype=dtype, device=device, cache_dtype=cache_dtype
    )


def load_runner(
    family: Family,
    weight_files: Sequence[Path],
    config_json: str,
    *,
    dtype: str = "f32",
    device: str = "cpu",
    cache_dtype: str | None = None,
    use_flash_attn: bool = False,
) -> Any:
    """The native runner of `family`: the one that takes `use_flash_attn` where the registry
    says the family's has it (`Family.flash_attn`), else `FamilyRunner`."""
    if family.flash_attn:
        return load_llama(
            weight_files,
            config_json,
            dtype=dtype,
            device=device,
            cache_dtype=cache_dtype,
            use_flash_attn=use_flash_attn,
        )
    return load_family(family.name, weight_files, config_json, dtype=dtype, device=device, cache_dtype=cache_dtype)


def load_gguf(path: Path, *, device: str = "cpu", loader: str = "quantized_llama") -> Any:
    """A `portkit_native.GgufRunner` through candle's GGUF loader `loader` (`portkit_native.gguf_loaders()`)."""
    _loading()
    return native().GgufRunner(str(path), device=device, loader=loader)


#: candle-core 0.11.0 runs its quantized matmuls (every GGUF weight but F32/F16/BF16) on a thread
#: pool of its own, sized once per process from this variable (default: the physical cores,
#: src/utils.rs:302-341), whose calling thread spin-waits for workers pinned to their cores
#: (utils.rs:130, :227-232).
QUANTIZED_THREADS_ENV = "CANDLE_NUM_THREADS"


def share_cores_with_reference() -> None:
    """One thread for candle's quantized matmuls in this process, unless the user set one: with
    transformers computing in its child on the same cores, the pool's spin-wait made each GGUF
    run 2-3x slower (the published Q4_1: 3.7 s beside the child, 1.1 s on one thread;
    docs/verify.md, "The two sides"). The numbers are the same on any count: each output is one
    `vec_dot` of its own (quantized/k_quants.rs:2444-2466). Call before the first GGUF runs."""
    os.environ.setdefault(QUANTIZED_THREADS_ENV, "1")


def quantized_threads() -> int | None:
    """The threads of candle's quantized matmuls here, as set (by verify beside the child, or by
    the user); None when unset or unreadable: candle then takes the physical cores, which
    RAYON_NUM_THREADS does not change, so rayon's count would misstate it."""
    try:
        n = int(os.environ.get(QUANTIZED_THREADS_ENV, ""))
    except ValueError:
        return None
    return n if n > 0 else None  # candle ignores 0 as it ignores words (utils.rs:335-341)


def check_device(pn: Any, device: str) -> None:
    """The native wheel's own message for a device it was not built with (exit 2), before any
    model is loaded."""
    try:
        pn.check_device(device)
    except (pn.DeviceUnavailableError, ValueError) as e:
        from portkit.verify.errors import BadInput

        raise BadInput(str(e).splitlines()[0]) from None
