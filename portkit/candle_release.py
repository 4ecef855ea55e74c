"""The candle release a run speaks about, and the releases a fact holds for.

A fact is "what candle X.Y.Z does", never "what candle does": candle-core, candle-nn and
candle-transformers move together every few months, and their users do not move with them
(downstream crates pin 0.9.x; `cargo add` gives the newest). Like ruff's `target-version`, the
release is resolved once per run, first match wins:

1. `--candle X.Y.Z` on the command line;
2. `candle = "X.Y.Z"` in `[tool.portkit]` (the pyproject.toml nearest the model directory);
3. the `candle-transformers` entry of the `Cargo.lock` found upward from the working directory
   (`--cargo-lock PATH` names one): where a candle user's version really lives;
4. `DEFAULT`.

Every report says the release and where it came from ("candle 0.9.1, from ../app/Cargo.lock").
`Span` is the range of releases a fact holds for, with the change that opened or closed it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from portkit.errors import UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    import argparse

#: the candle releases on crates.io that portkit's facts speak about, oldest first
RELEASES = ("0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1")
#: the release the portkit-native wheel is built on: what `portkit verify` runs
NATIVE = "0.11.1"
#: the releases `portkit verify` runs: NATIVE from the wheel, each other one built on first use from
#: native/ against that release's crates (portkit.verify.candle.release_build)
RUNNABLE = ("0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", NATIVE)
#: the release when nothing names one: the newest that verify runs as well as lint speaks of
DEFAULT = NATIVE
#: a Cargo.lock larger than this is not one (a hostile or mistaken path): refused, not read whole
MAX_LOCK_BYTES = 64 * 2**20


@functools.lru_cache(maxsize=64)  # every rule asks on every model: parse each release once
def key(release: str) -> tuple[int, ...]:
    """`"0.10.0"` -> `(0, 10, 0)`: releases order as numbers, not as strings."""
    return tuple(int(p) for p in release.split("."))


def check(release: object, where: str) -> str:
    """`release` if portkit speaks about it, else UsageError naming the ones it does."""
    if isinstance(release, str) and release in RELEASES:
        return release
    shown = f"{release!r:.40}" if not isinstance(release, str) else f"`{release[:40]}`"
    raise UsageError(f"{where}: candle {shown} is not a release portkit knows; one of {', '.join(RELEASES)}")


@dataclass(frozen=True, slots=True)
class Span:
    """The releases a fact holds for: from `since` (None: every release portkit knows) up to,
    not including, `until` (None: still true in the newest), with what changed at each end."""

    since: str | None = None
    until: str | None = None
    since_by: str = ""  # the change that made it true (a candle PR, "qwen3.rs added")
    until_by: str = ""  # the change that made it false (the fix)

    def holds(self, release: str) -> bool:
        if self.since is None and self.until is None:  # most facts: every release
            return True
        k = key(release)
        return (self.since is None or key(self.since) <= k) and (self.until is None or k < key(self.until))

    def releases(self) -> list[str]:
        return [r for r in RELEASES if self.holds(r)]

    def describe(self) -> str:
        """ "candle 0.10.0-0.11.0; fixed in 0.11.1 by candle#3879", as `explain` and the rule pages print it."""
        held = self.releases()
        if not held:
            return "no candle release portkit knows"
        text = f"candle {held[0]}" + (f"-{held[-1]}" if len(held) > 1 else "")
        if self.since is not None:
            text += f"; since {self.since}" + (f" ({self.since_by})" if self.since_by else "")
        if self.until is not None:
            text += f"; fixed in {self.until}" + (f" by {self.until_by}" if self.until_by else "")
        return text


#: every release portkit knows
ALWAYS = Span()

#: the `tokenizers` crate each release's candle reads tokenizer.json with (native/releases/*/Cargo.lock;
#: 0.9.x's candle-core has none, so there it is the one that release's candle-examples asks for)
TOKENIZERS_CRATE = {
    "0.9.1": "0.21.4",
    "0.9.2": "0.22.2",
    "0.10.0": "0.22.2",
    "0.10.1": "0.22.2",
    "0.10.2": "0.22.2",
    "0.11.0": "0.22.2",
    "0.11.1": "0.23.2",
}
#: the regex engine that crate compiles `Split` and `Replace` patterns with: `onig` until candle-core
#: 0.11.1 asked for `features = ["fancy-regex"]` (candle-core-0.11.1/Cargo.toml:286-289)
FANCY_REGEX = Span(since="0.11.1", since_by="candle-core 0.11.1 builds tokenizers with fancy-regex, not onig")


@dataclass(frozen=True, slots=True)
class Chosen:
    """The release of one run and where it came from, as a report's header says it."""

    release: str
    source: str  # "--candle", "pyproject.toml", "../app/Cargo.lock", "the default: no Cargo.lock above ..."

    def describe(self) -> str:
        return said(self.release, self.source)


def said(release: str, source: str) -> str:
    """How a report's header names the release: "candle 0.9.1, from ../app/Cargo.lock",
    "candle 0.11.0, the default (no Cargo.lock in this directory or above)"."""
    return f"candle {release}, {source}" if source.startswith("the default") else f"candle {release}, from {source}"


def find_cargo_lock(start: Path) -> Path | None:
    """The Cargo.lock in `start` or the nearest directory above it, as cargo finds its workspace's."""
    try:
        here = start.resolve()
    except (OSError, RuntimeError):
        return None
    for d in (here, *here.parents):
        lock = d / "Cargo.lock"
        if lock.is_file():
            return lock
    return None


def from_cargo_lock(lock: Path) -> str | None:
    """The candle-transformers release `lock` pins, None when it pins none. Cargo.lock versions 1-4 all
    list `[[package]]` tables with `name` and `version`. UsageError: not a Cargo.lock, two candle-transformers
    versions, or one portkit does not know."""
    import tomllib  # only when a lock is read

    try:
        if lock.stat().st_size > MAX_LOCK_BYTES:
            raise UsageError(f"{lock}: {lock.stat().st_size} bytes is too large for a Cargo.lock")
        doc = tomllib.loads(lock.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{lock}: cannot read it as a Cargo.lock: {e}") from None
    packages = doc.get("package", [])
    if not isinstance(packages, list):
        raise UsageError(f"{lock}: not a Cargo.lock (`package` is not a list of tables)")
    versions = sorted(
        {str(p.get("version")) for p in packages if isinstance(p, dict) and p.get("name") == "candle-transformers"},
        key=lambda v: (not v.replace(".", "").isdigit(), v),
    )
    if not versions:
        return None
    if len(versions) > 1:
        raise UsageError(f"{lock}: it pins candle-transformers {' and '.join(versions)}; say which with --candle")
    return check(versions[0], f"{lock}: candle-transformers")


def _shown(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)


def resolve(
    flag: str | None = None, cargo_lock: str | os.PathLike[str] | None = None, cwd: Path | None = None
) -> Chosen:
    """The run's release without `[tool.portkit]` (which is per model directory: `portkit.settings`
    puts it above a lock's): the flag, else the lock named or found upward from `cwd`, else DEFAULT."""
    if flag is not None:
        return Chosen(check(flag, "--candle"), "--candle")
    lock: Path | None
    if cargo_lock is not None:
        lock = Path(cargo_lock)
        if not lock.is_file():
            raise UsageError(f"--cargo-lock {cargo_lock}: no such file")
    else:
        lock = find_cargo_lock(cwd or Path.cwd())
    if lock is None:
        return Chosen(DEFAULT, "the default (no Cargo.lock in this directory or above)")
    release = from_cargo_lock(lock)
    if release is None:
        return Chosen(DEFAULT, f"the default ({_shown(lock)} has no candle-transformers)")
    return Chosen(release, _shown(lock))


def add_arguments(parser: argparse.ArgumentParser, *, lock: bool = True) -> None:
    """`--candle` (and `--cargo-lock`) on a command that speaks about a release."""
    group = parser.add_argument_group("candle release")
    group.add_argument(
        "--candle",
        metavar="X.Y.Z",
        help=f"the candle release you run ({', '.join(RELEASES)}); default: [tool.portkit] `candle`, else the "
        "candle-transformers of the Cargo.lock in this directory or above, else the newest that verify runs",
    )
    if lock:
        group.add_argument(
            "--cargo-lock",
            metavar="PATH",
            help="read the candle release from this Cargo.lock, not the one found upward",
        )


def from_args(args: argparse.Namespace) -> Chosen:
    """`resolve` of a command's `--candle` and `--cargo-lock`, from the working directory."""
    return resolve(getattr(args, "candle", None), getattr(args, "cargo_lock", None))
