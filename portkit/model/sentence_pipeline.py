"""A model directory's sentence-transformers pipeline, read bounded and never executed.

`modules.json` lists the modules sentence-transformers 6.3.0 chains after the encoder
(`sentence_transformers/base/model.py`, `_load_sbert_model`): a Transformer (its options in
`sentence_bert_config.json`, `base/modules/transformer.py` `config_file_name`), Pooling
(`1_Pooling/config.json`: `pooling_mode`, or the legacy `pooling_mode_*` booleans, which
`sentence_transformer/modules/pooling.py` `_convert_legacy_pooling_kwargs` folds to one mode,
"mean" when none is true; `include_prompt`, default true), Dense (`2_Dense/config.json`:
`in_features`, `out_features`, `bias` default true, `activation_function` default Tanh,
`base/modules/dense.py`; its weights in the folder's model.safetensors, of which only the header
is read, or a pytorch_model.bin, noted and never opened) and Normalize (`base/modules/normalize.py`:
its folder is optional, `load_config` returns {} when the file is absent). The whole model's
`config_sentence_transformers.json` holds `prompts`, `default_prompt_name` and
`similarity_fn_name`.

A Pooling or Dense module whose folder or config.json is missing does not load in
sentence-transformers 6.3.0: `Module.load_config` returns {} and the constructor raises
`TypeError: ... missing ... required positional argument(s)` (`embedding_dimension`; `in_features` and `out_features`),
measured.
Those, bad JSON and a modules.json that is not a list are `problems`, which rules report with
their file and position; nothing here raises on a malformed pipeline.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from portkit.errors import InputError
from portkit.model.jsonfile import exists, read_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

MODULES_JSON = "modules.json"
SBERT_CONFIG = "sentence_bert_config.json"
ST_CONFIG = "config_sentence_transformers.json"
KINDS = ("Transformer", "Pooling", "Dense", "Normalize")
#: Pooling modes sentence-transformers 6.3.0 accepts (`Pooling.POOLING_MODES`).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
MAX_MODULES = 64


@dataclass(frozen=True, slots=True)
class PipelineProblem:
    """Something sentence-transformers would refuse, at a file and position."""

    file: Path
    message: str
    row: int = 1
    column: int = 1
    kind: str = "invalid"  # invalid | missing


@dataclass(frozen=True, slots=True)
class PipelineModule:
    index: int
    type: str  # as modules.json writes it
    path: str
    kind: str  # Transformer | Pooling | Dense | Normalize | other (another sentence-transformers class) | custom
    row: int = 1  # where modules.json lists it
    column: int = 1
    folder_exists: bool = True
    config: dict[str, Any] | None = None
    pooling_mode: tuple[str, ...] = ()
    include_prompt: bool = True
    in_features: int | None = None
    out_features: int | None = None
    bias: bool = True
    activation: str = "torch.nn.modules.activation.Tanh"
    weights_file: str | None = None  # model.safetensors | pytorch_model.bin
    weight_shape: tuple[int, ...] | None = None  # linear.weight from the safetensors header

    def label(self) -> str:
        if self.kind == "Pooling" and self.pooling_mode:
            return f"Pooling({'+'.join(self.pooling_mode)})"
        if self.kind == "Dense" and self.in_features is not None:
            return f"Dense({self.in_features}->{self.out_features}, {self.activation.rsplit('.', 1)[-1]})"
        if self.kind in KINDS:
            return self.kind
        return self.type


@dataclass(frozen=True, slots=True)
class SentencePipeline:
    modules_path: Path
    modules: tuple[PipelineModule, ...] = ()
    problems: tuple[PipelineProblem, ...] = ()
    max_seq_length: int | None = None
    do_lower_case: bool = False
    sbert_config_path: Path | None = None
    max_seq_length_at: tuple[int, int] = (1, 1)  # row, column of the key in sentence_bert_config.json
    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    similarity_fn_name: str | None = None
    st_config_path: Path | None = None

    def of_kind(self, kind: str) -> list[PipelineModule]:
        return [m for m in self.modules if m.kind == kind]

    def summary(self) -> str:
        chain = " -> ".join(m.label() for m in self.modules) or "(no modules)"
        msl = f", max_seq_length {self.max_seq_length}" if self.max_seq_length is not None else ""
        lower = ", do_lower_case" if self.do_lower_case else ""
        sim = f", similarity {self.similarity_fn_name}" if self.similarity_fn_name else ""
        return f"{chain}{msl}{lower}{sim}"


def _kind(type_: str) -> str:
    if type_.startswith("sentence_transformers."):
        last = type_.rsplit(".", 1)[-1]
        return last if last in KINDS else "other"
    return "custom"


def _json(path: Path, problems: list[PipelineProblem]) -> Any:
    """A pipeline JSON file's value, or None with the problem noted (never raises for content)."""
    try:
        text = read_text(path)
    except InputError as e:
        problems.append(PipelineProblem(path, e.what))
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        problems.append(PipelineProblem(path, f"invalid JSON: {e.msg}", e.lineno, e.colno))
        return None
    except RecursionError:
        problems.append(PipelineProblem(path, "invalid JSON: nesting too deep"))
        return None


def _key_pos(text: str, needle: str) -> tuple[int, int]:
    i = text.find(needle)
    if i < 0:
        return 1, 1
    row = text.count("\n", 0, i) + 1
    return row, i - (text.rfind("\n", 0, i) + 1) + 1


def _safe_sub(path: object) -> str | None:
    if not isinstance(path, str) or "\\" in path or "\0" in path or path.startswith("/"):
        return None
    if any(part == ".." for part in path.split("/")):
        return None
    return path.strip("/")


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_sentence_pipeline(root: Path) -> SentencePipeline:
    problems: list[PipelineProblem] = []
    mpath = root / MODULES_JSON
    raw = _json(mpath, problems)
    try:
        mtext = read_text(mpath)
    except InputError:
        mtext = ""
    modules: list[PipelineModule] = []
    if raw is not None and not isinstance(raw, list):
        problems.append(
            PipelineProblem(
                mpath,
                f"modules.json must be a list of modules, not a JSON {type(raw).__name__}; sentence-transformers "
                "iterates it",
            )
        )
    elif isinstance(raw, list):
        seen = 0
        for i, entry in enumerate(raw[:MAX_MODULES]):
            row, col = 1, 1
            j = mtext.find('"type"', seen)
            if j >= 0:  # the i-th module's "type" key, where a finding about it points
                row, col = mtext.count("\n", 0, j) + 1, j - (mtext.rfind("\n", 0, j) + 1) + 1
                seen = j + 1
            if not isinstance(entry, dict) or not isinstance(entry.get("type"), str) or "path" not in entry:
                problems.append(
                    PipelineProblem(
                        mpath,
                        f"module {i} must be an object with string `type` and `path` (sentence-transformers reads "
                        "module_config['type'] and ['path'])",
                        row,
                        col,
                    )
                )
                continue
            sub = _safe_sub(entry["path"])
            if sub is None:
                problems.append(
                    PipelineProblem(
                        mpath,
                        f"module {i} path {str(entry['path'])[:80]!r} leaves the model directory; "
                        "sentence-transformers refuses it (_validate_relative_path)",
                        row,
                        col,
                    )
                )
                continue
            modules.append(_module(root, i, entry["type"], sub, row, col, problems))
    max_seq, lower, sbert, msl_at = None, False, None, (1, 1)
    tr = next((m for m in modules if m.kind == "Transformer"), None)
    if tr is not None:
        p = (root / tr.path / SBERT_CONFIG) if tr.path else root / SBERT_CONFIG
        if exists(p):
            sbert = p
            v = _json(p, problems)
            if isinstance(v, dict):
                max_seq = _int(v.get("max_seq_length"))
                msl_at = _key_pos(read_text(p), '"max_seq_length"')
                lower = v.get("do_lower_case") is True
            elif v is not None:
                problems.append(PipelineProblem(p, "sentence_bert_config.json must be a JSON object"))
    prompts: dict[str, str] = {}
    default_prompt, sim, stp = None, None, None
    if exists(root / ST_CONFIG):
        stp = root / ST_CONFIG
        v = _json(stp, problems)
        if isinstance(v, dict):
            pr = v.get("prompts")
            if isinstance(pr, dict):
                prompts = {str(k): x for k, x in pr.items() if isinstance(x, str)}
            dp = v.get("default_prompt_name")
            default_prompt = dp if isinstance(dp, str) else None
            s = v.get("similarity_fn_name")
            sim = s if isinstance(s, str) else None
        elif v is not None:
            problems.append(PipelineProblem(stp, "config_sentence_transformers.json must be a JSON object"))
    return SentencePipeline(
        modules_path=mpath,
        modules=tuple(modules),
        problems=tuple(problems),
        max_seq_length=max_seq,
        do_lower_case=lower,
        sbert_config_path=sbert,
        max_seq_length_at=msl_at,
        prompts=prompts,
        default_prompt_name=default_prompt,
        similarity_fn_name=sim,
        st_config_path=stp,
    )


def _module(
    root: Path, i: int, type_: str, sub: str, row: int, col: int, problems: list[PipelineProblem]
) -> PipelineModule:
    kind = _kind(type_)
    folder = root / sub if sub else root
    has_folder = exists(folder) and folder.is_dir()
    base = PipelineModule(index=i, type=type_, path=sub, kind=kind, row=row, column=col, folder_exists=has_folder)
    if kind not in ("Pooling", "Dense"):
        return base
    cfg_path = folder / "config.json"
    if not has_folder or not exists(cfg_path):
        what = "folder" if not has_folder else "config.json"
        arg = (
            "1 required positional argument: 'embedding_dimension'"
            if kind == "Pooling"
            else "2 required positional arguments: 'in_features' and 'out_features'"
        )
        problems.append(
            PipelineProblem(
                root / MODULES_JSON,
                f"modules.json lists {kind} at {sub or '.'!r} but its {what} ({cfg_path.relative_to(root)}) is "
                "missing: sentence-transformers "
                "6.3.0 reads no config (Module.load_config returns {}) and fails to load it (TypeError: "
                f"{kind}.__init__() missing {arg})",
                row,
                col,
                "missing",
            )
        )
        return base
    cfg = _json(cfg_path, problems)
    if not isinstance(cfg, dict):
        if cfg is not None:
            problems.append(PipelineProblem(cfg_path, f"{kind} config.json must be a JSON object"))
        return base
    if kind == "Pooling":
        mode = cfg.get("pooling_mode")
        if mode is None:
            mode = tuple(m for k, m in _LEGACY_POOLING.items() if cfg.get(k) is True) or ("mean",)
        modes = (
            (mode,)
            if isinstance(mode, str)
            else tuple(x for x in mode if isinstance(x, str))
            if isinstance(mode, (list, tuple))
            else ()
        )
        bad = [m for m in modes if m not in POOLING_MODES]
        if bad or not modes:
            problems.append(
                PipelineProblem(
                    cfg_path,
                    f"pooling mode {bad or mode!r} is none of {', '.join(POOLING_MODES)}: sentence-transformers raises "
                    "ValueError",
                    *_key_pos(read_text(cfg_path), '"pooling_mode'),
                )
            )
        return replace(
            base, config=cfg, pooling_mode=modes, include_prompt=cfg.get("include_prompt", True) is not False
        )
    weights, shape = None, None
    if exists(folder / "model.safetensors"):
        weights = "model.safetensors"
        from portkit.model.safetensors_header import LfsPointer, read_safetensors_header

        try:
            h = read_safetensors_header(folder / "model.safetensors")
            t = h.tensors.get("linear.weight")
            shape = t.shape if t is not None else None
        except LfsPointer:
            pass
        except InputError as e:
            problems.append(PipelineProblem(folder / "model.safetensors", e.what))
    elif exists(folder / "pytorch_model.bin"):
        weights = "pytorch_model.bin"  # pickle: noted, never opened
    act = cfg.get("activation_function")
    return replace(
        base,
        config=cfg,
        in_features=_int(cfg.get("in_features")),
        out_features=_int(cfg.get("out_features")),
        bias=cfg.get("bias", True) is not False,
        activation=act if isinstance(act, str) else "torch.nn.modules.activation.Tanh",
        weights_file=weights,
        weight_shape=shape,
    )
