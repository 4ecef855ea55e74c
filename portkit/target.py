"""The runtime a model will run on in candle: device, dtype, cargo features, options.

The runtime rules (PK3xx) are about this target, not about the files alone.

`Target(...)` checks its values (they come from the command line and from `[tool.portkit]`
in a pyproject.toml) and raises `ValueError` with one line saying what is wrong. It is lax
where TOML users expect it (`max-tokens = "8192"`, `use-flash-attn = "yes"`), as the pydantic
model it replaced was, and strict about names (`device = "CPU"` is refused).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from portkit.candle_release import DEFAULT as DEFAULT_CANDLE
from portkit.candle_release import RELEASES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, Literal

    Device = Literal["cpu", "metal", "cuda"]
    DType = Literal["f32", "bf16", "f16"]

DEVICES = ("cpu", "metal", "cuda")
DTYPES = ("f32", "bf16", "f16")
KNOWN_FEATURES = ("accelerate", "mkl", "flash-attn", "cuda", "metal", "cudnn")
_TRUE = {"1", "on", "t", "true", "y", "yes"}
_FALSE = {"0", "off", "f", "false", "n", "no"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Where the model will run in candle; checked on construction (ValueError, one line)."""

    device: Device = "cpu"
    dtype: DType = "f32"
    features: frozenset[str] = field(default_factory=frozenset)
    use_flash_attn: bool = False
    max_tokens: int | None = None  # prompt + generated tokens the user will run
    # the longest prompt fed in one forward (candle masks only a multi-token forward); None: max_tokens
    max_prompt_tokens: int | None = None
    # multi-token segments fed to one KV cache (2: a chat's second turn, at an offset on the warm cache)
    turns: int = 1
    batch: int = 1  # rows of equal length in one forward (servers, embedding programs)
    # the candle program's sampler (`portkit.semantics.sampling.parse`: a preset or key=value
    # pairs); None: generation_config.json's values passed as candle's call takes them
    sampler: str | None = None
    #: the candle release the run speaks about, and where it came from (`portkit.candle_release`)
    candle: str = DEFAULT_CANDLE
    candle_from: str = "the default"

    def __post_init__(self) -> None:
        _one_of("device", self.device, DEVICES)
        _one_of("dtype", self.dtype, DTYPES)
        if self.candle not in RELEASES:
            raise ValueError(
                f"`candle` should be a release portkit knows ({', '.join(RELEASES)}), got {self.candle!r:.40}"
            )
        object.__setattr__(self, "features", _features(self.features))
        object.__setattr__(self, "use_flash_attn", _bool(self.use_flash_attn))
        if self.max_tokens is not None:
            object.__setattr__(self, "max_tokens", _int(self.max_tokens))
        if self.max_prompt_tokens is not None:
            object.__setattr__(self, "max_prompt_tokens", _int(self.max_prompt_tokens))
        object.__setattr__(self, "turns", _count("turns", self.turns))
        object.__setattr__(self, "batch", _count("batch", self.batch))
        if self.sampler is not None:
            if not isinstance(self.sampler, str):
                raise ValueError(f"`sampler` should be a preset name or key=value pairs, got {self.sampler!r:.40}")
            from portkit.sampler import parse  # only when one is stated

            parse(self.sampler)  # SamplerError is a ValueError: one line

    @property
    def prefill_tokens(self) -> int | None:
        """The longest single forward the run feeds candle: the prompt bound, else `max_tokens`."""
        return self.max_prompt_tokens if self.max_prompt_tokens is not None else self.max_tokens

    @property
    def continues(self) -> bool:
        """A later turn is fed many tokens at once at an offset, on the cache of the first."""
        return self.turns > 1

    @property
    def batched(self) -> bool:
        return self.batch > 1

    @property
    def half_past_matmul(self) -> bool:
        """f16, or bf16 off the CPU: a half-precision run that gets past its first matmul (candle's
        CPU matmul has no BF16, PK301, so bf16 on the CPU fails there first)."""
        return self.dtype == "f16" or (self.dtype == "bf16" and self.device != "cpu")

    def describe(self) -> str:
        feats = f" features={','.join(sorted(self.features))}" if self.features else ""
        paths = (f" turns={self.turns}" if self.continues else "") + (f" batch={self.batch}" if self.batched else "")
        return f"{self.device}/{self.dtype}{feats}{paths}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "dtype": self.dtype,
            "features": self.features,
            "use_flash_attn": self.use_flash_attn,
            "max_tokens": self.max_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "turns": self.turns,
            "batch": self.batch,
            "sampler": self.sampler,
            "candle": self.candle,
            "candle_from": self.candle_from,
        }


def _one_of(name: str, v: Any, allowed: tuple[str, ...]) -> None:
    if not isinstance(v, str) or v not in allowed:
        choices = ", ".join(repr(a) for a in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise ValueError(f"`{name}` should be {choices}, got {v!r:.40}")


def _features(v: Any) -> frozenset[str]:
    if isinstance(v, str) or not isinstance(v, (list, tuple, set, frozenset)):
        raise ValueError(f"`features` should be a list of cargo feature names, got {v!r:.40}")
    odd = [x for x in v if not isinstance(x, str)]
    if odd:
        raise ValueError(f"`features` should be a list of cargo feature names, got {odd[0]!r:.40} in it")
    bad = sorted(set(v) - set(KNOWN_FEATURES))
    if bad:
        raise ValueError(f"unknown cargo feature(s) {bad}; known: {', '.join(KNOWN_FEATURES)}")
    return frozenset(v)


def _bool(v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    raise ValueError(f"`use-flash-attn` should be a boolean, got {v!r:.40}")


def _int(v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v):
            return int(v)
        raise ValueError(f"`max-tokens` should be a whole number, got {v!r}")
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise ValueError(f"`max-tokens` should be a whole number, got {v!r:.40}")


def _count(name: str, v: Any) -> int:
    """`turns` and `batch`: a whole number, at least 1 (lax about TOML spellings, as `_int`)."""
    if isinstance(v, bool):
        raise ValueError(f"`{name}` should be a whole number of at least 1, got {v!r}")
    try:
        n = _int(v)
    except ValueError:
        raise ValueError(f"`{name}` should be a whole number of at least 1, got {v!r:.40}") from None
    if n < 1:
        raise ValueError(f"`{name}` should be a whole number of at least 1, got {n}")
    return n
