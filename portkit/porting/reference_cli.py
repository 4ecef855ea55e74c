"""`portkit reference MODEL_DIR --out ref.safetensors`: the command line around
`portkit.porting.reference.write`. `portkit.cli` imports this module lazily (add_arguments,
run, HELP). Exit 0: written; 2: bad input (one line on stderr, never a traceback)."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

HELP = (
    "write transformers' values (every layer and each submodule in it, logits, greedy) for comparing a candle port "
    "of your own"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model_dir",
        metavar="MODEL_DIR",
        help="directory with config.json and safetensors weights, or ORG/NAME[@REV] from the Hugging Face cache",
    )
    parser.add_argument(
        "--out",
        "-o",
        required=True,
        type=Path,
        metavar="FILE",
        help="the safetensors file to write (e.g. ref.safetensors)",
    )
    prompt = parser.add_mutually_exclusive_group()
    prompt.add_argument("--ids", metavar="1,2,3", help="prompt token ids, comma separated")
    prompt.add_argument("--text", metavar="TEXT", help="prompt text, encoded with the model dir's tokenizer.json")
    prompt.add_argument(
        "--chat",
        metavar="MESSAGE",
        help="one user message, rendered with the model's chat template by transformers (with the generation prompt) "
        "and encoded as apply_chat_template encodes it; the rendered prompt is recorded beside its ids",
    )
    parser.add_argument("--tokens", type=int, default=8, metavar="N", help="greedy tokens to generate (default: 8)")
    parser.add_argument(
        "--reference",
        default="auto",
        metavar="auto|streamed|whole",
        help="transformers streamed one decoder layer at a time (models larger than memory), or the whole model; "
        "auto: whole when the f32 weights take under half the available memory (default: auto)",
    )
    parser.add_argument(
        "--dtype",
        default="f32",
        help="dtype of the stored tensors: f32, f16 or bf16 (default: f32; computed in f32 always)",
    )
    parser.add_argument(
        "--layers-only",
        action="store_true",
        help="record only the output of each decoder layer, not each submodule inside it (layer.N.input_layernorm, "
        "layer.N.self_attn.q_proj, ...), which `portkit compare` uses to say what inside the first bad layer differs",
    )


def run(args: argparse.Namespace) -> int:
    from portkit.porting.guard import guarded

    if _is_the_program():
        # A short-lived process: importing torch and transformers makes about a million objects
        # and Python's cyclic collector walks them all a few times (0.6 to 1 s of CPU on the 135M
        # bench, ~13%); the loaders leave ~11k cyclic objects once and the greedy steps none, so
        # what is left uncollected until exit is bounded.
        gc.disable()
    code = guarded("reference", lambda: _run(args))
    if "torch" in sys.modules and _is_the_program():
        # As verify's reference child does: skip torch's teardown (about a second and a half
        # of CPU on a 135M model), which frees nothing the operating system would not.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _is_the_program() -> bool:
    """`portkit reference` run as a command (the console script, `python -m portkit[.cli]`),
    not `portkit.cli.main` called by a program that goes on running."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return spec.name in ("portkit.cli", "portkit.__main__")
    return os.path.basename(getattr(main, "__file__", "") or "") == "portkit"


def _run(args: argparse.Namespace) -> int:
    from portkit.porting.dumpfile import describe_names
    from portkit.porting.reference import write
    from portkit.verify.model_dir import model_dir_arg

    def progress(s: str) -> None:
        if os.environ.get("PORTKIT_PROGRESS"):
            print(f"portkit reference: {s}", file=sys.stderr)

    w = write(
        model_dir_arg(args.model_dir),
        args.out,
        ids=args.ids,
        text=args.text,
        chat=args.chat,
        tokens=args.tokens,
        dtype=args.dtype,
        mode=args.reference,
        layers_only=args.layers_only,
        progress=progress,
    )
    warning = w.prompt.short_warning()
    if warning:
        print(f"portkit: warning: {warning}", file=sys.stderr)
    m = w.metadata
    shapes = {k: "x".join(map(str, v)) for k, v in w.tensors.items()}
    ids = json.loads(m["prompt"])["ids"]
    size = f"{w.bytes / 2**20:.1f} MiB" if w.bytes >= 2**20 else f"{w.bytes / 1024:.0f} KiB"
    print(f"wrote {w.path} ({size}, {m['dtype']}) in {w.seconds:.1f} s")
    print(f"  {m['runtime']}: transformers {m['transformers']}, torch {m['torch']}; family {m['family']}")
    print(f"  {describe_names(list(w.tensors))}")
    print(
        f"  hidden [{shapes.get('embeddings', '?')}], logits [{shapes['logits']}], greedy [{shapes.get('greedy', '0')}]"
    )
    print(f"  ids {','.join(map(str, ids))}")
    if w.prompt.source == "--chat":
        print(f"  prompt (transformers' chat template): {w.prompt.text!r}")
    print(f"next: dump your port on these ids, then `portkit compare {w.path} yours.safetensors`")
    return 0
