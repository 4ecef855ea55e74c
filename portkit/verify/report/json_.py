"""A verify report as JSON (`schemas/verify-report.schema.json`; tokenizer files alone:
`schemas/verify-tokenizer-report.schema.json`): every number, strict JSON (no NaN)."""

from __future__ import annotations

import math
from typing import Any

from portkit.verify.candle.run import RunOutputs
from portkit.verify.embedding.report import EmbeddingReport
from portkit.verify.judge.checks import GreedyCheck, LayerCheck, LogitsCheck, StepCheck, Tolerance
from portkit.verify.judge.comparison import Comparison
from portkit.verify.judge.floor import Floor
from portkit.verify.pipeline import VerifyReport
from portkit.verify.sections.gguf import GgufSection
from portkit.verify.tokenizer_run import TokenizerReport

SCHEMA_VERSION = 1


def _num(x: float | None) -> float | str | None:
    """JSON has no NaN/inf: they become strings."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def tolerance_json(t: Tolerance) -> dict[str, Any]:
    return {
        "name": t.name,
        "logits_atol": t.logits_atol,
        "layer_rtol": t.layer_rtol,
        "near_tie": t.near_tie,
        "reason": t.reason,
    }


def _last_json(c: LogitsCheck) -> dict[str, Any]:
    return {
        "n": c.n,
        "max_abs_diff": _num(c.max_abs_diff),
        "max_abs_ref": _num(c.max_abs_ref),
        "worst_index": c.worst_index,
        "tolerance": c.tolerance,
        "floor": _floor_json(c.floor),
        "ok": c.ok,
    }


def _floor_json(f: Floor | None) -> dict[str, Any] | None:
    """The criterion measured in the run (null: the fallback constant judged)."""
    return None if f is None else {k: v if isinstance(v, str) else _num(v) for k, v in f.to_json().items()}


def _steps_json(c: StepCheck) -> dict[str, Any]:
    return {
        "steps": c.steps,
        "argmax_agree": c.agree,
        "max_abs_diff": _num(c.max_abs_diff),
        "median_abs_diff": _num(c.median_abs_diff),
        "max_abs_ref": _num(c.max_abs_ref),
        "near_tie": c.near_tie,
        "tolerance": c.atol,
        "floor": _floor_json(c.floor),
        "nonfinite_steps": list(c.nonfinite_steps),
        "disagreements": [
            {
                "step": d.step,
                "ref_token": d.ref_token,
                "got_token": d.got_token,
                "ref_margin": _num(d.ref_margin),
                "near_tie": d.near_tie,
            }
            for d in c.disagreements
        ],
        "ok": c.ok,
    }


def _greedy_json(c: GreedyCheck) -> dict[str, Any]:
    return {
        "reference": c.ref,
        "candle": c.got,
        "first_divergence": c.first_divergence,
        "ref_margin": _num(c.ref_margin),
        "at_near_tie": c.at_near_tie,
        "ok": c.ok,
    }


def _layers_json(c: LayerCheck, judged: bool) -> dict[str, Any]:
    return {
        "rtol": c.rtol if judged else None,
        "judged": judged,
        "first_over": c.first_over if judged else None,
        "max_rel": _num(c.max_rel),
        "max_ratio": _num(c.max_ratio) if c.max_ratio is not None else None,
        "rows": [
            {
                "name": r.name,
                "max_abs_ref": _num(r.max_abs_ref),
                "max_abs_diff": _num(r.max_abs_diff),
                "rel": _num(r.rel),
                "over": r.over and judged,
                "nonfinite": r.nonfinite,
                "floor": _floor_json(r.floor),
            }
            for r in c.rows
        ],
        "ok": c.ok or not judged,
    }


def comparison_json(c: Comparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {
        "ok": c.ok,
        "summary": c.headline(),
        "problem": c.problem,
        "last_position": _last_json(c.last) if c.last else None,
        "teacher_forced": _steps_json(c.steps) if c.steps else None,
        "greedy": _greedy_json(c.greedy) if c.greedy else None,
        "layers": _layers_json(c.layers, c.layers_judged) if c.layers else None,
        "localisation": c.localisation.to_json() if c.localisation else None,
    }


def _run_json(r: RunOutputs) -> dict[str, Any]:
    return {
        "status": "ok" if r.failure is None else "failed",
        "failure": r.failure.to_json() if r.failure else None,
        "seconds": round(r.seconds, 4),
        "source": r.source,
    }


def _gguf_json(g: GgufSection) -> dict[str, Any]:
    return {
        "path": str(g.path),
        "loader": g.loader,
        "weight_types": g.weight_types,
        "tolerance": tolerance_json(g.tolerance),
        "run": _run_json(g.run),
        "comparison": comparison_json(g.comparison),
        "findings": [f.to_json() for f in g.findings],
        "diagnosis": g.diagnosis,
        "explanation": g.explanation.to_json() if g.explanation is not None else None,
        "ok": g.ok,
    }


def clean(v: Any) -> Any:
    """Strict JSON: non-finite floats become strings, numpy scalars plain numbers."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float) or hasattr(v, "__float__"):
        try:
            f = float(v)
        except (TypeError, ValueError):
            return str(v)
        if hasattr(v, "dtype") and getattr(v.dtype, "kind", "f") in "iu":
            return int(v)
        return _num(f)
    return str(v)


def _prompt_json(prompt: Any) -> dict[str, Any]:
    out = {"ids": list(prompt.ids), "source": prompt.source, "text": prompt.text}
    if prompt.candle_ids is not None:  # a text prompt: the tokenizers crate's own ids beside transformers'
        out["candle_ids"] = list(prompt.candle_ids)
    return out


def to_json(rep: VerifyReport | TokenizerReport | EmbeddingReport) -> dict[str, Any]:
    if isinstance(rep, (TokenizerReport, EmbeddingReport)):  # tokenizer files only; an embedding model
        return clean(rep.to_json())
    return clean(_to_json(rep))


def _to_json(rep: VerifyReport) -> dict[str, Any]:
    o = rep.options
    return {
        "schema_version": SCHEMA_VERSION,
        "model_dir": str(rep.model.root),
        "family": rep.family,
        "device": o.device,
        "dtype": o.dtype,
        "versions": rep.versions,
        "reference": {
            "runtime": "transformers",
            "attn_implementation": "eager",
            "dtype": "f32",
            "device": "cpu",
            "mode": rep.reference.mode,
            "source": rep.reference.source,
            "forced": rep.reference.forced,
        },
        "prompt": _prompt_json(rep.prompt),
        "tokenizer": rep.tokenizer.to_json() if rep.tokenizer is not None else None,
        "greedy_stop": rep.greedy_stop,
        "tokens": o.tokens,
        "tolerance": tolerance_json(rep.tolerance),
        "candle": _run_json(rep.run),
        "comparison": comparison_json(rep.comparison),
        "lint": {
            "ran": rep.lint_note is None,
            "note": rep.lint_note,
            "findings": len(rep.findings)
            + sum(len(g.findings) for g in rep.ggufs)
            + (len(rep.paths.findings) if rep.paths else 0)
            + (len(rep.sampling.findings) if rep.sampling else 0),
        },
        "findings": [f.to_json() for f in rep.findings],
        "explanation": rep.explanation.to_json() if rep.explanation is not None else None,
        "gguf": _gguf_json(rep.gguf) if rep.gguf else None,
        "plot": str(rep.plot) if rep.plot else None,
        "nonfinite": rep.nonfinite.to_json() if rep.nonfinite is not None else None,
        "verdict": rep.verdict()[0],
        "exit_code": rep.exit_code,
        "seconds": round(rep.seconds, 3),
        "timings": rep.timings,
        "candle_runs": rep.candle_runs,
        "run_plan": rep.run_plan,
        "reference_runs": rep.reference_runs,
        # only with --turns or --batch: the plain report keeps its keys
        **({"paths": rep.paths.to_json()} if rep.paths is not None else {}),
        # only with several --gguf (the first is "gguf" too): every section, in order
        **({"ggufs": [_gguf_json(g) for g in rep.ggufs]} if len(rep.ggufs) > 1 else {}),
        # only with a generation_config.json or a stated sampler
        **(
            {"sampling": {**rep.sampling.to_json(), "findings": [f.to_json() for f in rep.sampling.findings]}}
            if rep.sampling is not None
            else {}
        ),
    }
