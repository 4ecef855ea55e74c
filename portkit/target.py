"""The runtime a model will run on in candle: device, dtype, cargo features, options.

The runtime rules (PK3xx) are about this target, not about the files alone.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

Device = Literal["cpu", "metal", "cuda"]
DType = Literal["f32", "bf16", "f16"]
KNOWN_FEATURES = ("accelerate", "mkl", "flash-attn", "cuda", "metal", "cudnn")


class Target(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    device: Device = "cpu"
    dtype: DType = "f32"
    features: frozenset[str] = frozenset()
    use_flash_attn: bool = False
    max_tokens: int | None = None  # prompt + generated tokens the user will run

    @field_validator("features")
    @classmethod
    def _known(cls, v: frozenset[str]) -> frozenset[str]:
        bad = sorted(set(v) - set(KNOWN_FEATURES))
        if bad:
            raise ValueError(f"unknown cargo feature(s) {bad}; known: {', '.join(KNOWN_FEATURES)}")
        return v

    def describe(self) -> str:
        feats = f" features={','.join(sorted(self.features))}" if self.features else ""
        return f"{self.device}/{self.dtype}{feats}"
