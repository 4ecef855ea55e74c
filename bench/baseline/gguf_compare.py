"""The GGUF workflow's comparison: the reference's step logits against the quantized candle
program's teacher-forced rows (max |diff| per step, argmax agreement with the reference's top-2
margin at each flip), and where candle's own greedy tokens fork from the reference's.

    python -I gguf_compare.py REF_PREFIX CANDLE.f32 CANDLE.json
"""

import json
import sys

import numpy as np

ref_prefix, candle_rows, candle_json = sys.argv[1:4]
ref = json.load(open(ref_prefix + ".json"))
vocab = ref["vocab"]
a = np.fromfile(ref_prefix + ".f32", dtype="<f4").reshape(-1, vocab)
b = np.fromfile(candle_rows, dtype="<f4").reshape(-1, vocab)
greedy = json.load(open(candle_json))["greedy"]
n = min(len(a), len(b))
agree = 0
for k in range(n):
    d = float(np.abs(a[k].astype(np.float64) - b[k]).max())
    top2 = np.sort(a[k])[-2:]
    same = int(a[k].argmax()) == int(b[k].argmax())
    agree += same
    print(f"step {k:3}  max|diff|={d:.3e}  argmax {'same' if same else 'FLIP (ref margin %.3g)' % (top2[1] - top2[0])}")
fork = next((k for k, (p, q) in enumerate(zip(ref["tokens"], greedy, strict=False)) if p != q), None)
print(f"argmax {agree}/{n}; greedy {'identical' if fork is None else f'forks at token {fork}'}")
