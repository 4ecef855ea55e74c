"""The candle program's sampler, as a user states it (`--sampler`, `[tool.portkit] sampler`): a
candle-examples preset or `key=value` pairs, and the Rust it stands for.

Read by `portkit.target` (a stated sampler is checked where the target is made) and by PK510's
semantics (`portkit.semantics.sampling`), which compares it with what `generate()` samples with.
Sources: candle-transformers 0.11.0 src/generation/mod.rs (`LogitsProcessor`, `Sampling`),
src/utils.rs:25 (`apply_repeat_penalty`); candle-examples 0.11.0 llama/main.rs:68-122 and :226-238,
qwen/main.rs:109-110 and :220-225 (the defaults).
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

VARIANTS = ("new", "ArgMax", "All", "TopK", "TopP", "TopKThenTopP", "GumbelSoftmax")
#: candle-examples' default seed (llama/main.rs:80); the distributions do not depend on it
SEED = 299792458


class SamplerError(ValueError):
    """A sampler setting portkit cannot read (one line, for exit code 2)."""


@dataclass(frozen=True, slots=True)
class CandleSampler:
    """A candle program's sampling step: `apply_repeat_penalty` (when `repeat_penalty` != 1) over
    the last `repeat_last_n` tokens (None: all of them), then its `LogitsProcessor`, built with
    `LogitsProcessor::new` (`sampling` "new") or `from_sampling` (a `Sampling` variant), drawing
    with `sample`, or `sample_f` with a closure keeping the top `top_k_renormalised` and
    renormalising (portkit's advice for top-k with top-p)."""

    sampling: str
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    repeat_penalty: float = 1.0
    repeat_last_n: int | None = 64
    top_k_renormalised: int | None = None

    def __post_init__(self) -> None:
        if self.sampling not in VARIANTS:
            raise SamplerError(f"unknown sampling {self.sampling!r}: one of {', '.join(VARIANTS)}")
        need = {
            "All": ("temperature",),
            "TopK": ("temperature", "top_k"),
            "TopP": ("temperature", "top_p"),
            "TopKThenTopP": ("temperature", "top_k", "top_p"),
            "GumbelSoftmax": ("temperature",),
        }.get(self.sampling, ())
        missing = [n for n in need if getattr(self, n) is None]
        if missing:
            raise SamplerError(f"Sampling::{self.sampling} needs {', '.join(missing)}")

    def effective(self) -> tuple[str, float | None, int | None, float | None]:
        """(variant, temperature, top_k, top_p) as `LogitsProcessor` runs it: `new` is ArgMax below
        a temperature of 1e-7, All without a top-p, else TopP (generation/mod.rs:31-42); a top-p
        outside (0, 1) samples everything (generation/mod.rs:137-146)."""
        s, t, k, p = self.sampling, self.temperature, self.top_k, self.top_p
        if s == "new":
            if t is None or t < 1e-7:
                return "ArgMax", None, None, None
            s, k = ("All", None) if p is None else ("TopP", None)
        if s == "ArgMax":
            return "ArgMax", None, None, None
        if s in ("TopP", "TopKThenTopP") and p is not None and not 0.0 < p < 1.0:
            p = None
            s = "All" if s == "TopP" else "TopK"
        if s in ("All", "GumbelSoftmax"):
            k = p = None
        if s == "TopK":
            p = None
        if s == "TopP":
            k = None
        return s, t, k, p

    @property
    def samples(self) -> bool:
        return self.effective()[0] != "ArgMax"

    @property
    def keeps_top_k(self) -> int | None:
        """The k of the top-k the program keeps (the variant's or its closure's)."""
        return self.top_k_renormalised or self.effective()[2]

    def processor(self) -> str:
        """How the program builds its `LogitsProcessor`, in Rust."""
        s, t, k, p = self.sampling, self.temperature, self.top_k, self.top_p
        if s == "new":
            return f"LogitsProcessor::new(seed, {_opt(t)}, {_opt(p)})"
        if s == "ArgMax":
            return "LogitsProcessor::from_sampling(seed, Sampling::ArgMax)"
        fields = {"TopK": [f"k: {k}"], "TopP": [f"p: {number(p)}"], "TopKThenTopP": [f"k: {k}", f"p: {number(p)}"]}.get(
            s, []
        )
        return (
            f"LogitsProcessor::from_sampling(seed, Sampling::{s} {{ "
            f"{', '.join([*fields, f'temperature: {number(t)}'])} }})"
        )

    def call(self) -> str:
        """The Rust the program runs each step, in one line."""
        draw = (
            f"sample_f(&logits, |prs| keep_top_k_renormalised(prs, {self.top_k_renormalised}))"
            if self.top_k_renormalised
            else "sample(&logits)"
        )
        out = f"{self.processor()}, then {draw}"
        if self.repeat_penalty != 1.0:
            window = (
                "&tokens"
                if self.repeat_last_n is None
                else f"&tokens[tokens.len().saturating_sub({self.repeat_last_n})..]"
            )
            out = f"apply_repeat_penalty(&logits, {number(self.repeat_penalty)}, {window}), then " + out
        return out

    def native_kwargs(self) -> dict[str, Any]:
        """`portkit_native.sampling_weights`' keyword arguments (the logits and contexts aside)."""
        return dict(
            sampling=self.sampling,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            repeat_penalty=float(self.repeat_penalty),
            repeat_last_n=2**62 if self.repeat_last_n is None else int(self.repeat_last_n),
            top_k_renormalised=self.top_k_renormalised,
            seed=SEED,
        )


def number(v: float | None) -> str:
    return "None" if v is None else f"{v:g}" if v != int(v) else f"{v:.1f}"


def _opt(v: float | None) -> str:
    return "None" if v is None else f"Some({number(v)})"


#: what the candle programs people start from pass, by name (candle-examples 0.11.0)
PRESETS: dict[str, tuple[CandleSampler, str]] = {
    "candle-examples": (
        CandleSampler("new", repeat_penalty=1.1, repeat_last_n=64),
        "candle-examples' qwen, mistral, gemma, phi defaults: no --temperature (greedy), --repeat-penalty 1.1 over "
        "--repeat-last-n 64",
    ),
    "candle-examples-llama": (
        CandleSampler("All", temperature=0.8, repeat_penalty=1.1, repeat_last_n=128),
        "candle-examples' llama defaults: --temperature 0.8, Sampling::All, --repeat-penalty 1.1 over --repeat-last-n "
        "128",
    ),
    "greedy": (CandleSampler("ArgMax"), "Sampling::ArgMax, no repeat penalty"),
}

SAMPLER_HELP = (
    "the candle program's sampler, compared with generate()'s (PK510): candle-examples, candle-examples-llama, greedy, "
    "or key=value pairs, comma separated: temperature, top_p, top_k, repeat_penalty, repeat_last_n (all: the whole "
    "sequence), top_k_renormalised, sampling (new or a Sampling variant) (default: generation_config.json's values as "
    "LogitsProcessor::new takes them)"
)

_KEYS = ("sampling", "temperature", "top_k", "top_p", "repeat_penalty", "repeat_last_n", "top_k_renormalised")


def parse(text: str) -> CandleSampler:
    """A stated sampler: a preset's name (`PRESETS`), or `key=value` pairs separated by commas:
    `temperature`, `top_p`, `top_k`, `repeat_penalty`, `repeat_last_n` (`all`: the whole
    sequence), `top_k_renormalised`, `sampling` (`new` or a `Sampling` variant; without it the
    variant follows from temperature, top_k and top_p as in candle-examples' llama/main.rs:226-238)."""
    text = text.strip()
    if text in PRESETS:
        return PRESETS[text][0]
    if "=" not in text:
        raise SamplerError(f"sampler {text!r}: a preset ({', '.join(PRESETS)}) or key=value pairs ({', '.join(_KEYS)})")
    vals: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, raw = part.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip()
        if key not in _KEYS:
            raise SamplerError(f"sampler: unknown key {key!r} (one of {', '.join(_KEYS)})")
        try:
            if key == "sampling":
                vals[key] = raw
            elif key == "repeat_last_n" and raw.lower() in ("all", "none"):
                vals[key] = None
            elif key in ("top_k", "repeat_last_n", "top_k_renormalised"):
                vals[key] = int(raw)
            else:
                vals[key] = float(raw)
        except ValueError:
            raise SamplerError(f"sampler: {key}={raw!r} is not a number") from None
    if "sampling" not in vals:
        t, k, p = vals.get("temperature"), vals.get("top_k"), vals.get("top_p")
        if t is None or t <= 0:
            vals["sampling"] = "ArgMax"
        else:
            vals["sampling"] = {
                (False, False): "All",
                (True, False): "TopK",
                (False, True): "TopP",
                (True, True): "TopKThenTopP",
            }[(k is not None, p is not None)]
    return CandleSampler(**vals)
