"""Where each planted fault is caught on the real weights, and by how much (docs/verify.md,
"Planted faults").

    python bench/planted_faults.py [--text PROMPT] [--tokens 8]

On the fixed SmolLM2-135M-Instruct (fixtures.real), at the thread count of the environment:

- `portkit compare` of `portkit reference` (with its f64 truth) against native/portkit-dump's
  example port (`llama_port`): healthy, `--bug eps-layer2`, `--bug rope-interleaved`, the port
  reading a config with `rms_norm_eps` 1e-6, and the healthy dump with one logit + 1e-3;
- `portkit verify`: one reference logit + 1e-3, and one weight tensor of layer 3 scaled by
  1 + 1e-3 on candle's side only (`bench/floor_margins.py`'s).

Prints a Markdown table: the fault, the verdict, the first bad layer and sub-layer, and the
deciding number against its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _first_bad(doc: dict) -> tuple[str, str]:
    """(first bad layer, first bad sub-layer or -) and the deciding number of a compare/verify JSON comparison."""
    c = doc["comparison"] if "comparison" in doc else doc
    loc = c.get("localisation")
    layers = c.get("layers") or {}
    rows = {r["name"]: r for r in layers.get("rows", [])}
    if loc is None:
        last = c.get("last_position") or {}
        f = last.get("floor")
        what = f"last position {f['ratio']:.3g}x its floor" if f else f"last position {last.get('max_abs_diff')}"
        return "logits", "-", what
    row = rows.get(loc["layer"]) or {}
    f = row.get("floor")
    what = (
        f"{loc['layer']}: {f['kind']} error {f['ratio']:.3g}x its floor (bound {f['bound'] / f['floor']:.0f}x)"
        if f
        else f"{loc['layer']}: rel {row.get('rel')}"
    )
    sub = loc["name"] if loc["name"] != loc["layer"] else "-"
    return loc["layer"], sub, what


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", default="The capital of France is Paris, and the capital of Germany is")
    ap.add_argument("--tokens", type=int, default=8)
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ["PORTKIT_VERIFY_REFERENCE"] = "inprocess"
    import contextlib
    import io

    import numpy as np
    from safetensors.numpy import load_file, save_file

    from fixtures.real import smollm2
    from fixtures.seams import reference_perturbed
    from portkit.cli import main as cli
    from portkit.porting.dumpfile import read_dump
    from portkit.verify.candle import native as candle_native
    from portkit.verify.pipeline import VerifyOptions, verify
    from portkit.verify.report.json_ import comparison_json
    from tests.real.inputs import linked_copy

    real = smollm2()
    work = Path(tempfile.mkdtemp(prefix="portkit-planted-"))
    target = Path(os.environ.get("CARGO_TARGET_DIR") or Path.home() / ".cache" / "portkit" / "target")
    subprocess.run(
        ["cargo", "build", "--release", "--examples", "--quiet"],
        cwd=ROOT / "native" / "portkit-dump",
        env=dict(os.environ, CARGO_TARGET_DIR=str(target)),
        check=True,
    )
    port = target / "release" / "examples" / "llama_port"
    ref = work / "ref.safetensors"
    assert cli(["reference", str(real.fixed), "--out", str(ref), "--text", a.text, "--tokens", str(a.tokens)]) == 0
    ids = ",".join(str(i) for i in read_dump(ref).tensors["ids"].tolist())

    def dump(model_dir: Path, bug: str) -> Path:
        out = work / f"{bug}-{model_dir.name}.safetensors"
        subprocess.run(
            [str(port), str(model_dir), str(out), "--ids", ids, "--tokens", str(a.tokens), "--bug", bug],
            check=True,
            capture_output=True,
        )
        return out

    def compare(cand: Path) -> tuple[int, dict]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            code = cli(["compare", str(ref), str(cand), "--format", "json"])
        return code, json.loads(buf.getvalue())

    healthy = dump(real.fixed, "none")
    d = read_dump(healthy)
    tensors = {k: np.ascontiguousarray(v) for k, v in d.tensors.items()}
    tensors["logits"] = tensors["logits"].copy()
    tensors["logits"][-1, 0] += np.float32(1e-3)
    nudged = work / "nudged.safetensors"
    save_file(tensors, str(nudged), metadata=dict(d.metadata))
    eps = linked_copy(real.fixed, work / "eps-1e-6", {"rms_norm_eps": 1e-6})
    cases = [
        ("compare: the healthy example port", healthy),
        ("compare: one logit of the healthy dump + 1e-3", nudged),
        ("compare: `--bug eps-layer2` (layer 2's norms, eps 1e-2)", dump(real.fixed, "eps-layer2")),
        ("compare: `--bug rope-interleaved`", dump(real.fixed, "rope-interleaved")),
        ("compare: the port reads `rms_norm_eps` 1e-6", dump(eps, "none")),
    ]
    rows = []
    for name, cand in cases:
        code, doc = compare(cand)
        layer, sub, what = _first_bad(doc)
        rows.append(f"| {name} | exit {code} | {layer if code else '-'} | {sub if code else '-'} | {what} |")

    # verify: the reference side nudged, and one weight tensor scaled on candle's side only
    opts = dict(model_dir=real.fixed, text=a.text, tokens=a.tokens, lint=False)
    with reference_perturbed(1e-3):
        rep = verify(VerifyOptions(**opts))
    layer, sub, what = _first_bad({"comparison": comparison_json(rep.comparison)})
    rows.append(f"| verify: one reference logit + 1e-3 | exit {rep.exit_code} | {layer} | {sub} | {what} |")
    scaled_dir = work / "scaled"
    scaled_dir.mkdir()
    w = load_file(str(real.fixed / "model.safetensors"))
    name = "model.layers.3.mlp.down_proj.weight"
    w[name] = (w[name].astype(np.float64) * (1 + 1e-3)).astype(np.float32)
    save_file(w, str(scaled_dir / "model.safetensors"), metadata={"format": "pt"})
    del w
    load_runner = candle_native.load_runner
    candle_native.load_runner = lambda family, files, *x, **kw: load_runner(
        family, [scaled_dir / "model.safetensors"], *x, **kw
    )
    try:
        rep = verify(VerifyOptions(**opts, cache=False))
    finally:
        candle_native.load_runner = load_runner
    layer, sub, what = _first_bad({"comparison": comparison_json(rep.comparison)})
    rows.append(f"| verify: `{name}` x (1 + 1e-3), candle only | exit {rep.exit_code} | {layer} | {sub} | {what} |")
    print("| fault | verdict | first bad layer | first bad sub-layer | the deciding number |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
