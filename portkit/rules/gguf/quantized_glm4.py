"""PK4xx only candle's `quantized_glm4` loader (GLM-4-0414 GGUFs: `general.architecture` `glm4`) has."""

from __future__ import annotations

from portkit.rules import as_candle
from portkit.rules.base import Context
from portkit.rules.gguf.base import GgufRule
from portkit.semantics.gguf import GLM4_PARTIAL_ROTARY, md_u32

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class Glm4GgufRotaryDimIgnored(GgufRule):
    """quantized_glm4 rotates half of each head whatever `glm4.rope.dimension_count` says.

    ## What it does
    Flags a GGUF read by quantized_glm4 whose `glm4.rope.dimension_count` is not half of
    `glm4.attention.key_length`.

    ## Why is this bad?
    llama.cpp's converter writes the rotated width, `head_dim x partial_rotary_factor`, and llama.cpp
    rotates that many dimensions. candle never reads the key: it builds its tables for a factor of
    0.5 ("partial rotary factor not embedded in gguf"), right for GLM-4-0414, wrong for a model trained
    with another factor, silently.

    ## Example
    `glm4.rope.dimension_count = 32`, `glm4.attention.key_length = 128` (a factor of 0.25).

    ## Fix
    None: no metadata key is read; run the safetensors checkpoint with candle's `glm4_new` module,
    which reads `partial_rotary_factor`.

    ## Candle source
    candle-transformers-0.11.1/src/models/quantized_glm4.rs:386-393 (`Some(0.5), //partial rotary factor not
    embedded in gguf`), :108-112.

    ## Verification
    numeric, transformers as candle computes: verify runs transformers with `partial_rotary_factor` 0.5;
    CONFIRMED when the GGUF agrees with it where it does not agree with transformers as written.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (`Glm4Model.set_gguf_parameters`: `rope.dimension_count` =
      head_dim x partial_rotary_factor)
    """

    code = "PK425"
    name = "glm4-gguf-rotary-dim-ignored"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `glm4_new` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_glm4",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            rot, head = md_u32(g, "glm4.rope.dimension_count"), md_u32(g, "glm4.attention.key_length")
            if rot is None or head is None:
                continue
            candle = int(GLM4_PARTIAL_ROTARY * head)
            if rot == candle:
                continue
            yield self.file_finding(
                ctx,
                g,
                f"`glm4.rope.dimension_count` is {rot} of a {head}-wide head; candle {ctx.target.candle}'s "
                f"quantized_glm4 never reads it and rotates {candle} (a hard-coded factor of 0.5)",
                transformers_value=rot,
                candle_value=candle,
                as_candle=as_candle.edit(
                    "half of each head rotated",
                    config=as_candle.partial_rotary(as_candle.raw_config(ctx), GLM4_PARTIAL_ROTARY),
                ),
            )
