"""The GGUF workflow's reference script: transformers (eager, f32, CPU) generates N greedy
tokens after the prompt and keeps every step's logits, for the quantized candle program to be
teacher-forced on (native/examples/gguf_logits.rs) and compared step by step (gguf_compare.py).

    HF_HUB_OFFLINE=1 python -I gguf_ref.py MODEL_DIR IDS N THREADS OUT_PREFIX

Writes OUT_PREFIX.f32 (the N rows, little-endian f32) and OUT_PREFIX.json ({"vocab", "tokens"}).
"""

import json
import sys

import torch
from transformers import AutoModelForCausalLM

model_dir, ids, n, threads, out = (
    sys.argv[1],
    [int(i) for i in sys.argv[2].split(",")],
    int(sys.argv[3]),
    int(sys.argv[4]),
    sys.argv[5],
)
torch.set_num_threads(threads)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
x = torch.tensor([ids])
with torch.inference_mode():
    g = model.generate(
        x,
        max_new_tokens=n,
        do_sample=False,
        eos_token_id=None,
        pad_token_id=0,
        output_logits=True,
        return_dict_in_generate=True,
    )
rows = torch.cat([step.float() for step in g.logits], dim=0)
rows.numpy().astype("<f4").tofile(out + ".f32")
with open(out + ".json", "w") as f:
    json.dump({"vocab": rows.shape[1], "tokens": g.sequences[0, x.shape[1] :].tolist()}, f)
