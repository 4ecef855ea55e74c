"""PK508 eos-stop-set-beyond-tokenizer-eos: `generate()` stops on more (or other) ids than the tokenizer's eos token."""

from __future__ import annotations

from portkit.rules.base import Context, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule
from portkit.semantics import tokenizer as S

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class EosStopSetBeyondTokenizerEos(TokenizerRule):
    """`generate()` stops on more (or other) ids than the tokenizer's eos token.

    ## What it does
    Compares the ids transformers' `generate()` stops on (generation_config.json's
    `eos_token_id`, else config.json's) with the id of the tokenizer's `eos_token`.

    ## Why is this bad?
    A candle program stops where it is told, usually on `tokenizer.token_to_id(eos_token)`.
    Llama 3.1 Instruct stops on [128001, 128008, 128009] while its tokenizer's eos is
    `<|eot_id|>` (128009); Qwen2.5 stops on [151645, 151643] (eos `<|im_end|>`); Phi-3's
    tokenizer eos `<|endoftext|>` is not how a turn ends (`<|end|>`). Stopping on the
    tokenizer's eos alone runs past the end of the answer.

    ## Example
    generation_config.json `{"eos_token_id": [128001, 128008, 128009]}` with tokenizer_config.json
    `"eos_token": "<|eot_id|>"`.

    ## Fix
    Stop your candle loop on every id the message lists (`LlamaEosToks::Multiple` for
    candle's llama). No file edit: both files are right for transformers.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:31-36 (`LlamaEosToks`: single or multiple);
    candle-transformers-0.11.0/src/generation/mod.rs:114 (`sample` knows no eos).

    ## Verification
    static-only, reported NOT-PROBED with why: a fact about the files; verify's greedy reference stops on
    generation_config's ids.

    ## References
    - https://github.com/huggingface/candle/issues/2085 (llama3 instruct ends turns with `<|eot_id|>`)
    - docs/tokenizers.md
    """

    code = "PK508"
    name = "eos-stop-set-beyond-tokenizer-eos"
    severity = "warning"
    fix_title = "Stop the candle generation loop on every id `generate()` stops on"
    probe_kind = "static-only"
    not_probed = (
        "the ids a candle loop stops on are the program's choice, not a number candle computes (verify's "
        "greedy comparison already stops where `generate()` does)"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        from portkit.semantics.transformers import eos_ids

        a = analysis(ctx)
        if a.crate is None or a.transformers is None or a.tj is None:
            return
        gen, cfg = a.generation, a.config
        if gen is not None and "eos_token_id" in gen:
            stop, src, doc = eos_ids(gen["eos_token_id"]), "generation_config.json", ctx.facts.generation_config
        elif cfg is not None and "eos_token_id" in cfg:
            stop, src, doc = eos_ids(cfg["eos_token_id"]), "config.json", ctx.facts.config
        else:
            return
        eos = a.transformers.eos_token
        eos_id = S.token_id(a.tj, a.crate, eos)
        if not stop or eos_id is None or set(stop) == {eos_id}:
            return
        missed = [i for i in stop if i != eos_id]
        id_to_token = {v: k for k, v in a.crate.added_ids.items()}
        named = ", ".join(f"{i} (`{id_to_token[i]}`)" if i in id_to_token else str(i) for i in missed)
        if eos_id in stop:
            tail = f"a candle loop that stops on it never stops on {named}"
        else:
            tail = f"a candle loop that stops on it stops where `generate()` does not, and never on {named}"
        assert doc is not None
        yield self.finding(
            ctx,
            f"transformers' `generate()` stops on `eos_token_id` {stop} ({src}); the tokenizer's eos token `{eos}` is "
            f"{eos_id}: {tail}",
            filename=doc.path,
            location=location(doc.position("eos_token_id")),
            transformers_value=stop,
            candle_value=[eos_id],
        )
