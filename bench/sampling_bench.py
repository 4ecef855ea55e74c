"""What PK510's sampling probe costs on the real checkpoint (docs/verify.md, "Sampling").

    python bench/sampling_bench.py [--tokens 8] [--repeats 3]

On SmolLM2-135M-Instruct (fixtures.real, 49152-token vocabulary) with a Llama-3-style
generation_config.json (do_sample, temperature 0.6, top_p 0.9, no top_k) beside the same weights
(symlinked), in this process:

- baseline: transformers' reference forward over the prompt and `--tokens` steps (what every
  verify computes; streamed, eager f32), timed in the same run;
- generate()'s distributions on those step rows (`portkit.verify.reference.sampling.compute`,
  transformers' process in a real verify), first run and repeats;
- the candle side and the judging (`verify_sampling`: the plain call, the advised one and each
  finding's counterfactuals through the native wheel), first run and repeats.

Prints each in seconds and as a ratio to the baseline; the target is under 0.2 s for both together.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LLAMA3 = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.6, "top_p": 0.9}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ["PORTKIT_VERIFY_REFERENCE"] = "inprocess"
    import portkit_native
    from fixtures.real import smollm2
    from portkit.verify.reference import sampling as refsampling
    from portkit.verify.reference.compute import forward_reference
    from portkit.verify.reference.extra import split
    from portkit.verify.reference.result import Reference
    from portkit.verify.sections.sampling import verify_sampling

    real = smollm2().tf5
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "smollm2-llama3-sampling"
        d.mkdir()
        for f in real.iterdir():
            if f.name != "generation_config.json":
                (d / f.name).symlink_to(f)
        (d / "generation_config.json").write_text(json.dumps(LLAMA3))
        prompt = list(range(1, 33))
        t0 = time.perf_counter()
        out = forward_reference(d, [d / "model.safetensors"], prompt, None, args.tokens, "streamed", lambda _s: None)
        baseline = time.perf_counter() - t0
        fed = out.greedy

        def reference_side() -> dict:
            return refsampling.compute(d, prompt, fed, out.rows, {"without": []}, lambda _s: None)

        ref_times, arrays = [], {}
        for _ in range(args.repeats):
            t = time.perf_counter()
            arrays = reference_side()
            ref_times.append(time.perf_counter() - t)
        _, extra = split(arrays)
        reference = Reference(prompt=prompt, greedy=fed, rows=out.rows, extra=extra)
        candle_times, section = [], None
        for _ in range(args.repeats):
            t = time.perf_counter()
            section = verify_sampling(d, reference, [], None, portkit_native)
            candle_times.append(time.perf_counter() - t)
    assert section is not None
    print(f"SmolLM2-135M, {len(prompt)}-id prompt, {args.tokens} steps, vocabulary {out.rows.shape[1]}")
    print(f"baseline: transformers' reference forward {baseline:.3f} s")
    for name, times in (
        ("generate()'s distributions (transformers)", ref_times),
        ("candle's sampler and the judging (native)", candle_times),
    ):
        rest = statistics.median(times[1:]) if len(times) > 1 else times[0]
        print(
            f"{name}: first {times[0]:.4f} s ({times[0] / baseline:.3f}x), repeats median {rest:.4f} s "
            f"({rest / baseline:.3f}x)"
        )
    total = ref_times[0] + candle_times[0]
    print(
        f"probe, first run, both sides: {total:.4f} s ({total / baseline:.3f}x the reference forward); target < 0.2 s: "
        f"{'met' if total < 0.2 else 'NOT met'}"
    )
    print(f"measured: plain call worst distance {section.program.worst:.3g}, advised {section.advised.worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
