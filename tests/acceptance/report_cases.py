"""verify's report on every acceptance fixture, minus what is run-specific: the record that a
change to how verify *runs* (the order, the processes, how many candle passes) must leave equal.

    python tests/acceptance/report_cases.py OUT.json [--only NAME,...]

runs each case of `cases()` through `portkit.verify.pipeline.verify` (`engine.verify` in the
base commit's flat layout; the portkit first on
sys.path: a checkout of an older commit put there by PYTHONPATH gives that commit's reports)
and writes {case: normalised JSON report}. `normalised` drops the timings and every `seconds`,
puts `<work>` for the scratch directory, and keeps everything else: every number, verdict,
evidence line, token and count. The caches are off (`cache=False`), so no side reads an earlier
run's entry and `source` is "computed" on both. tests/acceptance/test_verify_same_reports.py
compares the reports of the base commit with today's.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

#: (name, how to get the model dir given the scratch dir, VerifyOptions keywords besides model_dir)
Case = tuple[str, Callable[[Path], Path], dict[str, Any]]

#: the keys whose values are times or say how the run went (not what it found), dropped wherever they appear
RUN_SPECIFIC = ("timings", "seconds", "run_plan")


def _variant(name: str) -> Callable[[Path], Path]:
    def get(_work: Path) -> Path:
        from fixtures.cache import fixture_dir

        return fixture_dir(name)

    return get


def _family(family: str, variant: str) -> Callable[[Path], Path]:
    def get(_work: Path) -> Path:
        from fixtures.families import family_fixture

        return family_fixture(family, variant)

    return get


def _shape(shape: str, variant: str, with_model: bool) -> Callable[[Path], Path]:
    def get(work: Path) -> Path:
        from fixtures.tokenizer_shapes import shape_dir

        d = work / f"tokens-{shape}-{variant}-{'model' if with_model else 'only'}"
        if not d.exists():
            shutil.copytree(shape_dir(shape, variant, with_model=with_model), d)
        return d

    return get


def _gguf(variant: str, **kw: Any) -> Callable[[Path], Path]:
    def get(_work: Path) -> Path:
        from fixtures.cache import gguf_file

        return gguf_file(variant, **kw)

    return get


def _family_gguf(family: str) -> Callable[[Path], Path]:
    def get(work: Path) -> Path:
        from fixtures.families import family_fixture
        from fixtures.gguf_writer import write_gguf

        out = work / f"{family}.gguf"
        if not out.exists():
            write_gguf(family_fixture(family, "legacy"), out)
        return out

    return get


def _proof(name: str, part: int) -> Callable[[Path], Path]:
    def get(_work: Path) -> Path:
        from fixtures.proof import CASES

        return next(c for c in CASES if c.name == name).build()[part]

    return get


def _chat_path(index: int, part: int) -> Callable[[Path], Path]:
    def get(_work: Path) -> Path:
        from fixtures.chat_paths import CASES, case_paths

        return case_paths(CASES[index])[part]  # type: ignore[return-value]

    return get


def _template(name: str, variant: str) -> Callable[[Path], Path]:
    def get(work: Path) -> Path:
        from fixtures.chat_templates import write_chat_template

        d = work / f"template-{name}-{variant}"
        if not d.exists():
            write_chat_template(d, name, variant)  # type: ignore[arg-type]
        return d

    return get


def cases() -> list[Case]:
    """The fixtures and options of tests/acceptance's verify tests."""
    from fixtures.family_matrix import extra_variants
    from fixtures.tokenizer_shapes import SHAPES
    from fixtures.variants import VARIANTS
    from portkit.families import FAMILIES

    out: list[Case] = []
    options = {"bf16-weights": {"dtype": "bf16"}}
    for v in VARIANTS:
        out.append((f"variant:{v}", _variant(v), options.get(v, {})))
    out += [
        ("healthy-tied:flash-attn", _variant("healthy-tied"), {"use_flash_attn": True}),
        ("healthy-tied:f16", _variant("healthy-tied"), {"dtype": "f16"}),
        ("healthy-tied:perturbed", _variant("healthy-tied"), {"perturb_reference": 1e-3}),
        ("healthy-tied:no-layers", _variant("healthy-tied"), {"layers": False, "tokens": 3}),
        ("healthy-tied:no-lint", _variant("healthy-tied"), {"lint": False, "tokens": 0}),
        ("rope-theta:whole", _variant("rope-theta-in-rope-parameters"), {"reference_mode": "whole", "tokens": 4}),
        ("head-dim-mismatch:no-layers", _variant("head-dim-mismatch"), {"tokens": 2, "layers": False}),
    ]
    gguf_cases = {
        "f32": ("healthy-tied", {"qtype": "f32"}),
        "q8_0": ("healthy-tied", {"qtype": "q8_0"}),
        "unpermuted": ("healthy-tied", {"qtype": "f32", "permute_qk": False}),
        "unpermuted-q8_0": ("healthy-tied", {"qtype": "q8_0", "permute_qk": False}),
        "no-freq-base": ("healthy-tied", {"qtype": "f32", "freq_base": False}),
        "rope-freqs": ("llama3-scaling-top-level", {"qtype": "f32"}),
        "other-seed": ("healthy-tied", {"qtype": "f32", "seed": 1}),
    }
    for name, (variant, kw) in gguf_cases.items():
        out.append((f"gguf:{name}", _variant(variant), {"gguf": _gguf(variant, **kw), "tokens": 4}))
    for fam in FAMILIES:
        for stage in ("legacy", "t5"):
            out.append((f"family:{fam.name}:{stage}", _family(fam.name, stage), {}))
    for fam, var in sorted(extra_variants()):
        out.append((f"family:{fam}:{var}", _family(fam, var), {}))
    out.append(("family:mixtral:int-window:f16", _family("mixtral", "int-window"), {"dtype": "f16", "tokens": 2}))
    for fam in ("mistral", "qwen2", "qwen3"):
        out.append((f"family-gguf:{fam}", _family(fam, "legacy"), {"gguf": _family_gguf(fam), "layers": False}))
    for shape in SHAPES:
        for variant in ("trigger", "clean"):
            out.append((f"tokens:{shape}:{variant}", _shape(shape, variant, False), {}))
    out += [
        (
            "tokens-model:phi3:trigger:chat",
            _shape("phi3", "trigger", True),
            {"tokens": 3, "layers": False, "chat": "Hi!"},
        ),
        (
            "tokens-model:phi3:trigger:text",
            _shape("phi3", "trigger", True),
            {"tokens": 3, "layers": False, "text": " Hello world"},
        ),
        ("tokens-model:phi3:clean:chat", _shape("phi3", "clean", True), {"tokens": 3, "layers": False, "chat": "Hi!"}),
        (
            "tokens-model:llama3:clean:ids",
            _shape("llama3", "clean", True),
            {"tokens": 6, "layers": False, "ids": "474,300,301,302,303,304,305,306"},
        ),
        ("tokens-model:gemma:trigger:default", _shape("gemma", "trigger", True), {"tokens": 4}),
        (
            "tokens-model:smollm:trigger:text",
            _shape("smollm", "trigger", True),
            {"tokens": 4, "text": "The capital of France is"},
        ),
        ("tokens-only:phi3:trigger:text", _shape("phi3", "trigger", False), {"text": " Hello world"}),
    ]
    # transformers as candle computes, chained crashes, a GGUF's per-layer capture (fixtures.proof)
    from fixtures.proof import CASES as PROOF

    for c in PROOF:
        kw = {**c.options, "gguf": _proof(c.name, 1)}  # None for a case without a GGUF
        out.append((f"proof:{c.name}", _proof(c.name, 0), kw))
    # a second turn and a batch (fixtures.chat_paths): the reference's `extra` rows
    from fixtures.chat_paths import CASES as PATHS

    for i, c in enumerate(PATHS):
        kw = {
            "dtype": c.dtype,
            "turns": c.turns,
            "batch": c.batch,
            "tokens": c.tokens,
            **({"gguf": _chat_path(i, 1)} if c.gguf else {}),
        }
        out.append((f"paths:{i}:{c.family}:{c.variant}", _chat_path(i, 0), kw))
    # the chat template in candle-examples and mistral.rs (fixtures.chat_templates)
    from fixtures.chat_templates import TEMPLATES

    for name in TEMPLATES:
        if name == "strftime":  # renders today's date: no two days' reports are equal
            continue
        for variant in ("trigger", "clean"):
            out.append((f"template:{name}:{variant}", _template(name, variant), {}))
    return out


#: a generated fixture's name in $PORTKIT_CACHE ends in the hash of its generators' source
#: (fixtures.cache.generator_hash): the same model whichever commit's generators named it
_FIXTURE_HASH = re.compile(r"-[0-9a-f]{12}(?=[/.-]|$)")


def _fixture_paths(text: str) -> str:
    from fixtures.cache import cache_root

    root = str(cache_root())
    if root not in text:
        return text
    inside = re.compile(re.escape(root) + r"(/[^\s'\"`,;)]*)")
    return inside.sub(lambda m: "<cache>" + _FIXTURE_HASH.sub("-<hash>", m.group(1)), text)


def normalised(doc: Any, work: Path) -> Any:
    """The report without what differs between two runs of the same verify (the scratch
    directory, a fixture's generator hash)."""
    if isinstance(doc, dict):
        return {k: normalised(v, work) for k, v in doc.items() if k not in RUN_SPECIFIC}
    if isinstance(doc, list):
        return [normalised(v, work) for v in doc]
    if isinstance(doc, str):
        return _fixture_paths(doc.replace(str(work), "<work>"))
    return doc


def _negative_control(options: Any, kw: dict[str, Any]) -> Any:
    """The case's `perturb_reference`: the test seam today (`fixtures.seams`); an option of
    `VerifyOptions` in a base commit from before the seam (then it stays in `kw`)."""
    import contextlib
    import dataclasses

    if "perturb_reference" not in kw or "perturb_reference" in {f.name for f in dataclasses.fields(options)}:
        return contextlib.nullcontext()
    from fixtures.seams import reference_perturbed

    return reference_perturbed(kw.pop("perturb_reference"))


def run_case(case: Case, work: Path) -> dict[str, Any]:
    try:
        from portkit.verify.errors import BadInput
        from portkit.verify.pipeline import VerifyOptions, verify
        from portkit.verify.report.json_ import to_json
    except ModuleNotFoundError:  # the base commit's flat layout (before verify/ became packages)
        from portkit.verify.engine import VerifyOptions, verify  # type: ignore[no-redef]
        from portkit.verify.inputs import BadInput  # type: ignore[no-redef]
        from portkit.verify.report import to_json  # type: ignore[no-redef]

    _name, model, kw = case
    kw = {k: (v(work) if callable(v) else v) for k, v in kw.items()}
    try:
        with _negative_control(VerifyOptions, kw):
            rep = verify(VerifyOptions(model_dir=model(work), cache=False, **kw))
    except BadInput as e:
        return {"bad_input": str(e).replace(str(work), "<work>")}
    return normalised(to_json(rep), work)


def main(argv: list[str]) -> int:
    out = Path(argv[0])
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else None
    work = Path(argv[argv.index("--work") + 1]) if "--work" in argv else out.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # fixtures/ (after the portkit under test, which PYTHONPATH puts first)
    reports = {}
    for case in cases():
        if only is None or case[0] in only:
            print(f"report_cases: {case[0]}", file=sys.stderr, flush=True)
            reports[case[0]] = run_case(case, work)
    out.write_text(json.dumps(reports, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
