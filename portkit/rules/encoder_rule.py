"""What every PK6xx rule on candle's encoder modules shares: finding the module config.json loads
into, and the class attributes of a rule on it."""

from __future__ import annotations

from portkit.candle_modules import ADDED
from portkit.candle_release import key
from portkit.encoders import detect as detect_encoder
from portkit.rules.base import Context, Rule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, ClassVar

    from portkit.encoders import Encoder


def encoder_config(ctx: Context) -> tuple[Any, Encoder | None]:
    """config.json's document and the candle encoder module it loads into (None: no encoder's, or one the
    target release does not have yet: nomic_bert arrived in 0.10.0)."""
    doc = ctx.facts.config
    enc = detect_encoder(doc.value) if doc is not None else None
    return doc, (enc if enc is not None and encoder_exists(enc, ctx.target.candle) else None)


def encoder_exists(enc: Encoder, release: str) -> bool:
    """Whether candle `release` has the encoder's module (`portkit.candle_modules.ADDED`)."""
    return key(ADDED[enc.name]) <= key(release)


class EncoderRule(Rule):
    """A rule on a checkpoint that loads into one of candle 0.11.0's encoder modules: it reads
    config.json, applies whatever the family, and verify's embedding run judges it."""

    group = "embedding"
    families: ClassVar[tuple[str, ...]] = ("*",)
    needs: ClassVar[tuple[str, ...]] = ("config",)
    probe_run = "embedding"
