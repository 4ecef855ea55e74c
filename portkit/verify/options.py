"""The options of one `portkit verify` run, as the command line gives them (`cli.py`) and every run reads them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from portkit.target import DEVICES, DTYPES  # noqa: F401  # the one definition, re-exported for verify's callers

DEFAULT_TOKENS = 8


@dataclass
class VerifyOptions:
    model_dir: Path
    device: str = "cpu"
    dtype: str = "f32"
    ids: str | list[int] | None = None
    text: str | None = None
    chat: str | None = None  # one user message, rendered with the model's chat template
    tokens: int = DEFAULT_TOKENS
    gguf: Path | None = None  # the first of `ggufs` (one --gguf: the only one)
    use_flash_attn: bool = False
    layers: bool = True  # per-layer capture (a copy of the forward on the runner's tensors)
    lint: bool = True
    reference_mode: str = "streamed"  # streamed (one layer in memory at a time) | whole (from_pretrained, the check)
    cache: bool = True  # the reference's and candle's caches under $PORTKIT_CACHE (--no-cache: off)
    turns: int = 1  # 2: a second turn on the warm KV cache (`portkit.verify.sections.paths`)
    batch: int = 1  # rows in one forward (`portkit.verify.sections.paths`)
    #: the candle program's sampler (`portkit.semantics.sampling.parse`); None: [tool.portkit]'s, else the plain call
    sampler: str | None = None
    #: every --gguf, in order (a quant ladder): one reference and one HF-checkpoint run for all
    ggufs: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        self.ggufs = tuple(Path(g) for g in self.ggufs)
        if self.ggufs and self.gguf is None:
            self.gguf = self.ggufs[0]
        elif self.gguf is not None and not self.ggufs:
            self.ggufs = (Path(self.gguf),)
