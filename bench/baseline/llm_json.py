"""The baseline, transformers side (docs/measurements.md): last-position logits and
greedy tokens of a Llama checkpoint as JSON on stdout.

    HF_HUB_OFFLINE=1 python -I llm_json.py MODEL_DIR IDS N_GREEDY [THREADS] > pt.json

IDS is comma separated (the bench has no tokenizer). eager attention, f32, CPU, fixed threads.
"""

import json
import sys

import torch
from transformers import AutoModelForCausalLM

model_dir, ids, n = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], int(sys.argv[3])
torch.set_num_threads(int(sys.argv[4]) if len(sys.argv) > 4 else 2)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
x = torch.tensor([ids])
with torch.inference_mode():
    logits = model(x).logits[0, -1]
    out = model.generate(x, max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
json.dump({"logits": logits.tolist(), "greedy": out[0, x.shape[1] :].tolist()}, sys.stdout)
