"""JSON Schemas, generated from the code that is their source of truth.

- `candle-llama-config`: what candle 0.11.0's `LlamaConfig` serde parse accepts, built from
  `portkit.families.llama.FIELDS` (the same table llama's family view runs).
- `gguf-llama-metadata`: the GGUF metadata candle's `quantized_llama` requires, over the
  JSON form `gguf_metadata_json()` gives a GGUF file (`{key: {"type": "U32", "value": 32}}`).
- `lint-report`: `portkit lint --format json`, from the `Finding` dataclass (through pydantic,
  imported only here).

`schemas/*.json` in the repository are these, written by `python -m portkit.schemas --write
schemas`; a test fails when a file is stale. `portkit schema NAME` prints one.

JSON Schema cannot say what serde_json also checks: that an integer field was written
without a fraction (`2.0` is refused, although JSON Schema calls it an integer), and that a
known key appears once. The tests check those two with a serde-like type checker and the
duplicate-key parse.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1


def _usize(desc: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "maximum": U64_MAX, "description": desc}


def _u32(desc: str) -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "maximum": U32_MAX, "description": desc}


def candle_llama_config() -> dict[str, Any]:
    from portkit.families.llama import FIELDS as LLAMA_CONFIG_FIELDS
    from portkit.families.llama import REQUIRED_FIELDS

    rope_scaling = {
        "type": "object",
        "description": "Llama3RopeConfig (llama.rs:23-30): every field required; unknown keys ignored",
        "required": ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "rope_type"],
        "properties": {
            "factor": {"type": "number", "description": "f32"},
            "low_freq_factor": {"type": "number", "description": "f32"},
            "high_freq_factor": {"type": "number", "description": "f32"},
            "original_max_position_embeddings": _usize("usize"),
            "rope_type": {"enum": ["llama3", "default"], "description": "Llama3RopeType (llama.rs:14-21)"},
        },
    }
    props: dict[str, Any] = {
        "hidden_size": _usize("usize"),
        "intermediate_size": _usize("usize"),
        "vocab_size": _usize("usize"),
        "num_hidden_layers": _usize("usize"),
        "num_attention_heads": _usize("usize"),
        "num_key_value_heads": {
            "oneOf": [{"type": "null"}, _usize("usize")],
            "description": "Option<usize>; absent or null: num_attention_heads",
        },
        "rms_norm_eps": {"type": "number", "description": "f64"},
        "rope_theta": {
            "type": "number",
            "description": "f32 with serde default 10000 when the key is absent (null is refused)",
        },
        "bos_token_id": {"oneOf": [{"type": "null"}, _u32("u32")], "description": "Option<u32>"},
        "eos_token_id": {
            "description": "Option<LlamaEosToks>: untagged u32 | [u32]",
            "oneOf": [{"type": "null"}, _u32("u32"), {"type": "array", "items": _u32("u32")}],
        },
        "rope_scaling": {"oneOf": [{"type": "null"}, rope_scaling], "description": "Option<Llama3RopeConfig>"},
        "max_position_embeddings": _usize("usize"),
        "tie_word_embeddings": {"type": ["boolean", "null"], "description": "Option<bool>; absent or null: false"},
    }
    assert list(props) == [f.name for f in LLAMA_CONFIG_FIELDS]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://portkit.invalid/schemas/candle-llama-config.schema.json",
        "title": "config.json as candle 0.11.0 models::llama::LlamaConfig accepts it",
        "description": (
            "candle-transformers-0.11.0/src/models/llama.rs:38-54, serde_json 1.0.154. Unknown keys are ignored. "
            "Not expressible here, checked by serde: integer fields must be written without a fraction (2.0 is "
            "refused), a known key may appear once, and number literals must fit a double."
        ),
        "type": "object",
        "required": list(REQUIRED_FIELDS),
        "properties": props,
        "additionalProperties": True,
    }


def gguf_llama_metadata() -> dict[str, Any]:
    from portkit.semantics.gguf import REQUIRED_F32, REQUIRED_U32

    def typed(t: str, desc: str, value: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "type": "object",
            "description": desc,
            "required": ["type", "value"],
            "properties": {"type": {"const": t}, "value": value or {}},
        }

    props: dict[str, Any] = {
        k: typed("U32", "read with Value::to_u32(): only U32", {"type": "integer", "minimum": 0, "maximum": U32_MAX})
        for k in REQUIRED_U32
    }
    for k in REQUIRED_F32:
        props[k] = typed("F32", "read with Value::to_f32(): only F32", {"type": "number"})
    props["llama.rope.freq_base"] = typed(
        "F32", "optional; absent or not F32: candle silently uses 10000", {"type": "number"}
    )
    props["general.architecture"] = typed(
        "STRING", "chooses the RoPE pairing (quantized_llama.rs:400-428)", {"type": "string"}
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://portkit.invalid/schemas/gguf-llama-metadata.schema.json",
        "title": "GGUF metadata candle 0.11.0 models::quantized_llama requires",
        "description": (
            "candle-transformers-0.11.0/src/models/quantized_llama.rs:372-394. Keys are always `llama.`-prefixed. "
            'A metadata value is written as {"type": GGUF value type, "value": ...} '
            "(portkit.schemas.gguf_metadata_json)."
        ),
        "type": "object",
        "required": list(REQUIRED_U32 + REQUIRED_F32),
        "properties": props,
        "additionalProperties": {"type": "object", "required": ["type"]},
    }


def lint_report() -> dict[str, Any]:
    # pydantic only here: it reads the stdlib dataclasses in portkit.findings (the lint path
    # never imports it); extra="forbid" reaches every nested dataclass.
    import dataclasses

    from pydantic import ConfigDict, TypeAdapter

    from portkit.findings import Finding, Fix, Location, ProbeJson
    from portkit.rules import CODES

    s = TypeAdapter(list[Finding], config=ConfigDict(extra="forbid")).json_schema(mode="serialization")
    # a probe's JSON is `Probe.to_json`, one shape for every kind of probe (`ProbeJson`), not
    # the fields of its class
    s["$defs"]["Probe"] = TypeAdapter(ProbeJson).json_schema(mode="serialization")
    # pydantic never calls a default_factory for the schema: write the default it makes (keys
    # sorted, as pydantic sorts them)
    for cls in (Finding, Fix, Location):
        props = s["$defs"][cls.__name__]["properties"]
        for f in dataclasses.fields(cls):
            if f.default_factory is not dataclasses.MISSING:
                props[f.name] = dict(sorted({**props[f.name], "default": f.default_factory()}.items()))
    s = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://portkit.invalid/schemas/lint-report.schema.json",
        "title": "portkit lint --format json",
        "description": "A list of findings; fields as in ruff's JSON output plus both effective values and the verify "
        "probe.",
        **s,
    }
    # codes are the published ones
    s["$defs"]["Finding"]["properties"]["code"]["enum"] = sorted(CODES)
    return s


def gguf_metadata_json(g: Any) -> dict[str, Any]:
    """A GGUF file's metadata as JSON: {key: {"type": "U32", "value": 32}} (long arrays: length only)."""
    out: dict[str, Any] = {}
    for k, v in g.metadata.items():
        if v.type == "ARRAY":
            out[k] = {"type": "ARRAY", "elem_type": v.elem_type, "length": v.length}
        else:
            out[k] = {"type": v.type, "value": v.value}
    return out


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "candle-llama-config": candle_llama_config,
    "gguf-llama-metadata": gguf_llama_metadata,
    "lint-report": lint_report,
}


def dumps(name: str) -> str:
    return json.dumps(SCHEMAS[name](), indent=2) + "\n"


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name in SCHEMAS:
        p = directory / f"{name}.schema.json"
        p.write_text(dumps(name), encoding="utf-8")
        out.append(p)
    return out


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        for p in write(Path(sys.argv[2])):
            print(p)
    else:
        print("usage: python -m portkit.schemas --write DIR", file=sys.stderr)
        sys.exit(2)
