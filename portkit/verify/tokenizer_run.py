"""verify on a directory of tokenizer files and no model to run: the third kind of run, a peer of
the decoder's (`portkit.verify.pipeline`) and the embedding model's (`portkit.verify.embedding.run`).

It runs the tokenizer section alone (`portkit.verify.sections.tokens`: both tokenizers' ids on
verify's corpus, the chat template in the Rust environments, each PK5xx finding's probe) and
returns a `TokenizerReport`, a `portkit.verify.outcome.RunOutcome` like the other two.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portkit.findings import Finding, SamplingDifference
from portkit.verify import cachefiles
from portkit.verify.candle.native import crate_versions, native, native_for_run
from portkit.verify.corpus import Sample
from portkit.verify.errors import BadInput, TokenizeError
from portkit.verify.judge.confirm import both_alike
from portkit.verify.judge.verdicts import Confirmation, identity
from portkit.verify.options import VerifyOptions
from portkit.verify.outcome import AGREE, EXIT_AGREE, EXIT_MISMATCH, MISMATCH
from portkit.verify.sections.tokenize import prompt_ids
from portkit.verify.sections.tokens import Encoded, TokenizerSection, has_tokenizer, tokenizer_section


def tokenizer_only(root: Path) -> bool:
    """A directory verify can only compare tokens in: tokenizer.json, and no config.json or no
    safetensors weights (pickle-only weights stay bad input: they are weights portkit refuses)."""
    if not root.is_dir() or not has_tokenizer(root):
        return False
    if not (root / "config.json").is_file():
        return True
    names = [p.name for p in root.iterdir()]
    has_weights = any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in names)
    pickles = any(n.endswith((".bin", ".pt", ".pth", ".ckpt")) for n in names)
    return not has_weights and not pickles


@dataclass
class TokenizerReport:
    """verify on a directory with tokenizer files and no model to run: the tokenizer section alone."""

    options: VerifyOptions
    section: TokenizerSection
    versions: dict[str, str]
    lint_note: str | None = None
    seconds: float = 0.0

    @property
    def family(self) -> str | None:
        """No candle module: tokenizer files alone."""
        return None

    @property
    def confirmed(self) -> list[Confirmation]:
        return [f for f in self.section.findings if f.confirmed]

    @property
    def exit_code(self) -> int:
        """1 only when candle's tokenizer differs (or cannot load the file): a finding confirmed
        on both sides alike (PK509) is reported, not a mismatch."""
        return EXIT_AGREE if self.section.ok else EXIT_MISMATCH

    def verdict(self) -> tuple[str, str]:
        if self.exit_code == 0:
            return (
                AGREE,
                "candle's tokenizer agrees with transformers (the forward was skipped: no weights)"
                + both_alike(self.confirmed),
            )
        bits = []
        if self.section.crate_error:
            bits.append("the tokenizers crate cannot load tokenizer.json")
        elif self.section.differing:
            bits.append(f"{len(self.section.differing)} of {len(self.section.encodes)} encodes differ")
        elif self.section.decode_differs:
            bits.append(f"{len(self.section.decode_differs)} of {self.section.decodes} decoded texts differ")
        t = self.section.templates
        if t is not None and not t.ok:
            bits.append(
                "the chat template renders otherwise in " + ", ".join(e for e in t.environments if t.differing(e))
            )
        if self.confirmed:
            bits.append(f"{len(self.confirmed)} finding{'s' if len(self.confirmed) != 1 else ''} confirmed")
        return MISMATCH, "MISMATCH: " + "; ".join(bits)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "model_dir": str(self.options.model_dir),
            "kind": "tokenizer",
            "versions": self.versions,
            "tokenizer": self.section.to_json(),
            "forward": "skipped: no model to run (tokenizer files only)",
            "lint": {"ran": self.lint_note is None, "note": self.lint_note, "findings": len(self.section.findings)},
            "verdict": self.verdict()[0],
            "exit_code": self.exit_code,
            "seconds": round(self.seconds, 3),
        }


def sampling_not_probed(findings: list[Finding]) -> list[Confirmation]:
    """The sampling findings' verdicts without a model: their probe compares both samplers on
    transformers' logits, which tokenizer files alone do not give."""
    return [
        Confirmation(
            **identity(f, "sampling"),
            verdict="NOT-PROBED",
            evidence="not probed: no model to run, and the sampling probe "
            "compares both samplers on transformers' logits (tokenizer files only)",
        )
        for f in findings
        if isinstance(f.probe, SamplingDifference)
    ]


def verify_tokenizer_only(
    opts: VerifyOptions,
    lint: Callable[[], list[Finding]],
    progress: Callable[[str], None],
    t_start: float,
    transformers: Callable[[], tuple[Any, str | None]],
) -> TokenizerReport:
    """`transformers`: transformers' tokenizer as `tokenizer_section` takes it."""
    if opts.ids is not None or opts.gguf is not None:
        raise BadInput(
            f"{opts.model_dir}: tokenizer files only (no model to run): --ids and --gguf need config.json and "
            "safetensors weights"
        )
    native_for_run()
    findings, note = (lint(), None) if opts.lint else ([], "lint skipped (--no-lint)")
    rec = transformers()
    sec = tokenizer_section(Path(opts.model_dir), findings, progress, transformers=lambda: rec)
    assert sec is not None
    sec.forward_note = "forward skipped: no model to run (tokenizer files only)"
    sec.findings += sampling_not_probed(findings)
    rank = {(f.code, f.message): i for i, f in reversed(list(enumerate(findings)))}  # lint's order
    sec.findings.sort(key=lambda c: rank.get((c.code, c.message), len(rank)))
    if (opts.text is not None or opts.chat is not None) and sec.compared:
        # the user's own text, tokenized on both sides: it leads the corpus
        try:
            p = prompt_ids(Path(opts.model_dir), text=opts.text, chat=opts.chat, transformers=rec)
        except TokenizeError as e:
            raise BadInput(str(e)) from None
        tag = "--chat" if opts.chat is not None else "--text"
        sec.encodes.insert(
            0,
            Encoded(
                Sample(p.text, (tag,)),
                True,
                list(p.candle or []),
                p.transformers,
                p.candle_pieces,
                p.transformers_pieces,
            ),
        )
    crates = crate_versions(native())
    versions = {
        "candle": crates["candle"],
        "tokenizers crate": crates["tokenizers"],
        "transformers": cachefiles.package_version("transformers"),
    }
    return TokenizerReport(
        options=opts, section=sec, versions=versions, lint_note=note, seconds=time.perf_counter() - t_start
    )
