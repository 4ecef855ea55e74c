"""The GGUF rules' base class: which loader's files a rule sees."""

from __future__ import annotations

from portkit.rules.base import Context, Rule
from portkit.semantics.gguf import GGUF_LOADERS, GgufView, loader_required_tensors

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

    from portkit.findings import Finding
    from portkit.model import GgufFile

ALL_LOADERS = tuple(GGUF_LOADERS.values())  # every candle GGUF loader, quantized_llama first


class GgufRule(Rule):
    group = "gguf"
    families: ClassVar[tuple[str, ...]] = ("*",)
    needs: ClassVar[tuple[str, ...]] = ("gguf",)
    # the candle GGUF loaders whose files the rule speaks about
    loaders: ClassVar[tuple[str, ...]] = ("quantized_llama",)

    def each(self, ctx: Context) -> Iterable[tuple[GgufFile, GgufView]]:
        return [(g, v) for g, v in ctx.ggufs if v.loader in self.loaders]

    def tv_ok(self, ctx: Context) -> bool:
        return bool(ctx.ftv is not None and ctx.ftv.ok)

    def file_finding(self, ctx: Context, g: GgufFile, message: str, **details: Any) -> Finding:
        """A finding about the GGUF `g` as a whole: its path and no position (`Rule.finding`
        would otherwise point into config.json). `details`: `Rule.finding`'s keywords."""
        return self.finding(ctx, message, filename=g.path, location=None, **details)


class GgufTensorRequired(GgufRule):
    """Shared by the rules for tensors a non-llama loader reads with `ct.tensor(..)?`."""

    severity = "error"
    effect = "load-error"
    probe_kind = "crash"

    def first_missing(self, g: GgufFile, loader: str) -> str | None:
        """The first tensor `loader` fails on (load order), None when all are there."""
        return next((n for n in loader_required_tensors(g, loader) if n not in g.tensors), None)
