"""The floor of any verify on the transformers side: `import transformers, torch`, then one
`generate` of the same length (from_pretrained, eager, f32, CPU) and nothing else.

    HF_HUB_OFFLINE=1 python -I floor.py MODEL_DIR IDS N THREADS
"""

import sys

import torch
import transformers

model_dir, ids, n = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], int(sys.argv[3])
torch.set_num_threads(int(sys.argv[4]))
model = transformers.AutoModelForCausalLM.from_pretrained(
    model_dir, dtype=torch.float32, attn_implementation="eager"
).eval()
with torch.inference_mode():
    model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=None, pad_token_id=0)
