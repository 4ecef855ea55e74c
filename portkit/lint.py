"""`lint_paths(paths, settings) -> Report`: the in-process API `portkit lint` and the
pre-commit hook run. Never imports torch or transformers; reads headers only."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from portkit import __version__
from portkit.candle_release import DEFAULT as DEFAULT_CANDLE
from portkit.candle_release import said
from portkit.errors import InputError, NoModelHere
from portkit.model import ModelFacts, ModelTarget, load_model, model_targets
from portkit.rules import RULES, Context, selected
from portkit.settings import Settings, for_dir

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from portkit.findings import Finding


MAX_SIZE = 2**31  # no Llama dimension comes near this; larger values are corrupt or hostile
MAX_LAYERS = 10_000
SIZE_KEYS = (
    "hidden_size",
    "intermediate_size",
    "vocab_size",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
    "head_dim",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class InputProblem:
    """A path lint could not read (exit 2), with the one-line reason."""

    path: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What one lint run found: findings sorted by file and position, errors, notes."""

    version: str = __version__
    candle_version: str = DEFAULT_CANDLE
    candle_from: str = "the default"  # where the release came from (`portkit.candle_release.Chosen.source`)
    findings: list[Finding] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    errors: list[InputProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.errors:
            return 2
        return 1 if self.findings else 0


def check_usable(facts: ModelFacts, ctx: Context) -> None:
    """Raise InputError when config.json cannot be compared at all (exit 2)."""
    doc = facts.config
    if doc is None:
        return
    if not isinstance(doc.value, dict):
        raise InputError(doc.path, "config.json is not a JSON object")
    ftv = ctx.ftv
    assert ftv is not None
    if not ftv.ok:
        raise InputError(doc.path, f"transformers refuses this config: {ftv.refused}")
    for k in SIZE_KEYS:
        v = doc.value.get(k)
        if v is None:
            continue
        if not 1 <= v < MAX_SIZE:
            raise InputError(doc.path, f"`{k}`={v} is not a usable size (expected 1 to {MAX_SIZE - 1})")
    layers = doc.value.get("num_hidden_layers")
    if isinstance(layers, int) and not 0 <= layers <= MAX_LAYERS:
        raise InputError(
            doc.path, f"`num_hidden_layers`={layers} is not a usable layer count (expected 0 to {MAX_LAYERS})"
        )
    eps = doc.value.get("rms_norm_eps")
    if isinstance(eps, float) and not 0 <= eps < 1:
        raise InputError(doc.path, f"`rms_norm_eps`={eps} is not a usable epsilon")
    theta = ftv.get("rope_theta")
    if theta is not None and not 0 < theta < 1e30:
        raise InputError(doc.path, f"`rope_theta`={theta} is not a usable RoPE base")


def lint_model(facts: ModelFacts, settings: Settings) -> list[Finding]:
    ctx = Context(facts, settings.target)
    check_usable(facts, ctx)
    out: list[Finding] = []
    for rule in selected(settings.select, settings.ignore, settings.preview):
        if ctx.applies(rule):
            out.extend(rule.check(ctx))
    return out


def lint_target(target: ModelTarget, settings: Settings) -> tuple[list[Finding], list[str]]:
    """(findings, notes) for what `target` names in its directory, each finding once.

    Raises NoModelHere / InputError like `load_model`. A GGUF named alone is linted with the
    directory's config.json and safetensors as context for the cross-checks (PK409, PK410);
    the findings about those files, and about the GGUFs not named, are not reported. When the
    context itself is unusable the GGUF is linted without it, with a note.
    """
    s = for_dir(settings, target.root)
    if s.target.candle != settings.target.candle:  # its own [tool.portkit] names another release: say so
        notes_release = [said(s.target.candle, s.target.candle_from)]
    else:
        notes_release = []
    if target.everything:
        facts = load_model(target.root)
        return lint_model(facts, s), notes_release + list(facts.notes)
    facts = load_model(target.root, target.ggufs, hf_model=target.hf_model or target.tokenizer)
    notes = notes_release + list(facts.notes)
    try:
        found = lint_model(facts, s)
    except InputError as e:
        if target.hf_model or target.tokenizer or not facts.ggufs:
            raise
        notes.append(f"config.json not used as context for the GGUF: {e.what}")
        facts = dataclasses.replace(facts, config=None, generation_config=None, safetensors=None)
        found = lint_model(facts, s)
    return [f for f in found if target.wants(f.filename, RULES[f.code].group)], notes


def lint_paths(paths: Iterable[str | os.PathLike[str]], settings: Settings | None = None) -> Report:
    """Lint what the paths name, each model once and each finding once.

    A directory means everything in it. A `.gguf` means that GGUF alone (the config.json
    beside it is context for the cross-checks; the other GGUFs of the directory are not
    linted). Any other file (config.json, *.safetensors, the index) means the Hugging Face
    model of its directory, once however many of its files are passed. A string that is no
    existing path but reads as `ORG/NAME[@REV]` is looked up in the local Hugging Face cache
    (`portkit.hub`, offline). Unreadable input becomes a `Report.errors` entry (exit 2); the
    other models are still linted. A directory reached only through a file argument that
    holds no model (a PEFT adapter, a diffusers subfolder: what a pre-commit hook passes) is
    skipped with a note instead: it was never asked for as a model.
    """
    settings = settings or Settings()
    findings: list[Finding] = []
    errors: list[InputProblem] = []
    notes: list[str] = []
    models: list[str] = []
    local: list[str | os.PathLike[str]] = []
    for p in paths:
        if not os.path.lexists(p) and isinstance(p, str):
            from portkit.hub import looks_like_repo_id

            if looks_like_repo_id(p):
                from portkit.hub import resolve

                try:
                    cached = resolve(p)
                except InputError as e:
                    errors.append(InputProblem(path=e.path, message=e.what))
                    continue
                notes.append(cached.describe())
                local.append(str(cached.path))
                continue
        local.append(p)
    version, source = settings.target.candle, settings.target.candle_from
    try:
        targets = model_targets(local)
    except InputError as e:
        return Report(
            errors=[*errors, InputProblem(path=e.path, message=e.what)], candle_version=version, candle_from=source
        )
    for t in targets:
        try:
            found, model_notes = lint_target(t, settings)
            findings.extend(found)
            if t.everything or t.hf_model or t.tokenizer:
                models.append(str(t.root))
            models.extend(str(t.root / n) for n in t.ggufs if not t.everything)
            notes.extend(f"{t.root}: {n}" for n in model_notes)
        except NoModelHere as e:
            if t.everything:
                errors.append(InputProblem(path=e.path, message=e.what))
            else:
                notes.append(f"{t.root}: skipped: no config.json or .gguf beside the files given")
        except InputError as e:
            errors.append(InputProblem(path=e.path, message=e.what))
    findings.sort(
        key=lambda f: (f.filename, f.location.row if f.location else 0, f.location.column if f.location else 0, f.code)
    )
    return Report(
        findings=findings, models=models, errors=errors, notes=notes, candle_version=version, candle_from=source
    )


def lint_dir(path: str | Path, settings: Settings | None = None) -> Report:
    return lint_paths([path], settings)


__all__: Sequence[str] = ["Report", "Settings", "lint_paths", "lint_model", "lint_target", "lint_dir"]
