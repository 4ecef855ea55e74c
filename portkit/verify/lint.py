"""Run `portkit lint` in-process for verify: the findings whose probes verify runs.

Lint is torch-free and takes milliseconds; verify hands it the target its own candle runs
use (device, dtype, the wheel's cargo features, flash-attn, prompt + generated tokens), marked
explicit so a `[tool.portkit]` table cannot describe a different run, while its rule
selection (`select`, `ignore`) still applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from portkit.errors import PortkitError
from portkit.findings import Finding
from portkit.lint import lint_model, lint_paths
from portkit.model import load_model
from portkit.model.gguf_header import read_gguf
from portkit.settings import Settings, for_dir
from portkit.target import Target

if TYPE_CHECKING:
    from portkit.target import Device, DType

Progress = Callable[[str], None]


class LintInputError(RuntimeError):
    """lint could not read the input (its exit-2 case); the message is lint's line."""


# verify's lint speaks of the release verify runs (the loaded portkit_native's `build_info()`), whatever [tool.portkit]
# says
TARGET_FIELDS = frozenset(
    {
        "candle",
        "device",
        "dtype",
        "features",
        "max_tokens",
        "max_prompt_tokens",
        "use_flash_attn",
        "turns",
        "batch",
        "sampler",
    }
)


def make_settings(
    device: Device,
    dtype: DType,
    use_flash_attn: bool,
    max_tokens: int | None,
    build: dict[str, Any],
    max_prompt_tokens: int | None = None,
    turns: int = 1,
    batch: int = 1,
    sampler: str | None = None,
) -> Settings:
    feats = set()
    if build.get("accelerate"):
        feats.add("accelerate")
    if build.get("flash_attn"):
        feats.add("flash-attn")
    for dev in build.get("devices", ()):
        if dev in ("metal", "cuda"):
            feats.add(dev)
    target = Target(
        device=device,
        dtype=dtype,
        features=frozenset(feats),
        use_flash_attn=use_flash_attn,
        max_tokens=max_tokens,
        max_prompt_tokens=max_prompt_tokens,
        turns=turns,
        batch=batch,
        sampler=sampler,
    )
    if "candle_version" in build:
        target = replace(target, candle=build["candle_version"], candle_from="the release portkit_native runs")
    # verify's own run wins over [tool.portkit], but for a sampler the command line did not state
    return Settings(target=target, explicit=TARGET_FIELDS if sampler is not None else TARGET_FIELDS - {"sampler"})


def lint(paths: list[Path], settings: Settings) -> tuple[list[Finding], list[str]]:
    """(findings, notes). Raises LintInputError with lint's own line when it cannot read a path."""
    try:
        report = lint_paths([str(p) for p in paths], settings)
    except PortkitError as e:  # UsageError from a bad [tool.portkit] table
        raise LintInputError(str(e)) from None
    if report.errors:
        first = report.errors[0]
        raise LintInputError(f"{first.path}: {first.message}")
    return list(report.findings), list(report.notes)


def lint_gguf_beside(model_dir: Path, gguf: Path, settings: Settings) -> list[Finding]:
    """lint's findings about `gguf` as if it sat in `model_dir`: the GGUF rules then see the
    config.json and safetensors it came from (freq_base vs rope_theta, Q/K row layout)."""
    try:
        facts = load_model(Path(model_dir))
        g = read_gguf(Path(gguf))
        facts = dataclasses.replace(facts, ggufs=(g,))
        found = lint_model(facts, for_dir(settings, Path(model_dir)))
    except PortkitError as e:
        raise LintInputError(str(e)) from None
    want = str(g.path)
    return [f for f in found if f.filename == want]


def lint_for_verify(
    model_dir: Path, ggufs: Sequence[Path], settings_args: dict[str, Any], progress: Progress
) -> tuple[list[Finding], list[list[Finding]]]:
    """(findings on the model dir, findings on each GGUF of `ggufs`)."""
    progress("lint: reading configs and headers")
    try:
        settings = make_settings(**settings_args)
        findings, _notes = lint([model_dir], settings)
        hf = [f for f in findings if not f.filename.endswith(".gguf")]
        return hf, [lint_gguf_beside(model_dir, Path(g), settings) for g in ggufs]
    except LintInputError as e:
        from portkit.verify.errors import BadInput

        raise BadInput(f"lint: {e}") from None


@dataclass(frozen=True)
class Routed:
    """Findings by the run of verify their probes need (`Probe.run`)."""

    prompt: list[Finding]  # judged on the prompt's forward (and the findings' counterfactuals)
    tokens: list[Finding]  # the tokens section: both tokenizers' ids, no forward
    paths: list[Finding]  # a second turn's or a batch's run
    sampling: list[Finding]  # the sampling section, on the reference's step rows


def route(findings: Sequence[Finding]) -> Routed:
    return Routed(
        prompt=[f for f in findings if _needs(f) == "prompt"],
        tokens=[f for f in findings if _needs(f) == "tokens"],
        paths=[f for f in findings if f.probe is not None and f.probe.on_path],
        sampling=[f for f in findings if _needs(f) == "sampling"],
    )


def _needs(f: Finding) -> str:
    return f.probe.run if f.probe is not None else "prompt"
