"""PK507 tokenizer-refused-by-crate: The tokenizers crate candle uses cannot load tokenizer.json."""

from __future__ import annotations

from portkit.candle_release import TOKENIZERS_CRATE
from portkit.rules.base import Context, location
from portkit.rules.tokenizer.analysis import analysis
from portkit.rules.tokenizer.base import TokenizerRule
from portkit.semantics import tokenizer_serde

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class TokenizerRefusedByCrate(TokenizerRule):
    """The tokenizers crate candle uses cannot load tokenizer.json.

    ## What it does
    Reads tokenizer.json the way the crate's serde deserializer does and predicts its refusal:
    a `version` other than "1.0", no `model`, an unknown model type, a normalizer, pre-tokenizer,
    post-processor or decoder that no struct of the crate deserializes (a `type` it does not know
    and fields that fit none, or a known `type` without a field it requires), BPE without vocab
    or merges, a merge string that does not split into two tokens at one space. On candle 0.11.1,
    whose crate (0.23.2) compiles `Split` and `Replace` patterns with fancy-regex instead of onig,
    also a pattern with an escape fancy-regex does not know (`\\R`, `\\X`, `\\N`, `\\y`, ...).

    ## Why is this bad?
    `Tokenizer::from_file` fails in the candle program before anything runs. A merge of three
    spaces (`"   "`) fails in both runtimes; a file with merges saved as pairs loads in 0.22 but
    fails in programs pinned to tokenizers 0.19 or older ("data did not match any variant of
    untagged enum ModelWrapper").

    ## Example
    `"merges": ["▁ t", "   ", ...]`; on 0.11.1, `"pattern": {"Regex": "\\R+"}` in a `Split`.

    Use instead: merges that each hold two tokens separated by one space (or as pairs).

    ## Fix
    None automatic: regenerate tokenizer.json with the `tokenizers` library.

    ## Candle source
    candle-core-0.11.0/src/quantized/tokenizer.rs:4-18 (the crate candle uses);
    tokenizers-0.22.2 src/tokenizer/serialization.rs:108-151, src/models/mod.rs:73-135,
    src/normalizers/mod.rs:41-195 (a tagged step, then every struct untagged; the same in
    src/pre_tokenizers/mod.rs and src/decoders/mod.rs), src/processors/mod.rs:14-60,
    src/models/bpe/model.rs:286-303, src/models/bpe/serialization.rs:131-154.
    candle-core-0.11.1/Cargo.toml:286-289 (`tokenizers` 0.23 with `fancy-regex`);
    fancy-regex-0.17.0 src/parse.rs:473-645 (`parse_escape`: "Invalid escape").

    ## Verification
    crash: verify loads tokenizer.json with the crate; CRASH-CONFIRMED when it fails with the
    predicted message.

    ## References
    - https://github.com/huggingface/tokenizers/pull/909 (merges and spaces)
    - https://github.com/allenai/open-instruct/issues/738 (merges saved as pairs, read by tokenizers 0.19: "data did not
      match any variant of untagged enum ModelWrapper")
    """

    code = "PK507"
    name = "tokenizer-refused-by-crate"
    severity = "error"
    effect = "load-error"
    fix_title = "Regenerate tokenizer.json with the `tokenizers` library; no edit portkit can make fixes it"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        a = analysis(ctx)
        if a.crate is None or a.crate.refused is None or a.tj is None:
            return
        msg = a.crate.refused
        key = (
            "merges"
            if msg.startswith(("Merges", "Missing vocab"))
            else "model"
            if "Model" in msg
            else "version"
            if msg.startswith("Unknown tokenizer version")
            else None
        )
        for component in tokenizer_serde.COMPONENTS:
            if tokenizer_serde.refusal(component, a.tj.value.get(component.key)) == msg:
                key = component.key
                break
        yield self.finding(
            ctx,
            f"the tokenizers crate {TOKENIZERS_CRATE[a.release]} that candle {a.release} uses refuses tokenizer.json: "
            f"`{msg}`; `Tokenizer::from_file` fails before anything runs",
            filename=a.tj.path,
            location=self.at(a, key) if key else location(None),
            candle_value=msg,
            expect=msg,
        )

    def refusal(self, finding: Finding) -> str:
        """No edit portkit can make fixes a file the crate refuses."""
        return (
            f"the tokenizers crate cannot load tokenizer.json ({finding.candle_value}): regenerate it with the "
            "`tokenizers` library"
        )
