"""Which regex patterns fancy-regex 0.17 refuses to parse, and its message: the engine the tokenizers
crate compiles tokenizer.json's `Split` and `Replace` patterns with from candle 0.11.1 on
(`portkit.candle_release.FANCY_REGEX`; onig before, which accepts them).

Mirrored: an escaped ASCII letter that fancy-regex's `parse_escape` has no meaning for
(fancy-regex-0.17.0/src/parse.rs:473-645), such as `\\R`, `\\X`, `\\N` or `\\y`, refused with
"Parsing error at position P: Invalid escape: \\R" (P: the backslash's byte offset). Some letters
mean something only outside a character class (`\\A`, `\\Z`, `\\G`, ...) and are refused inside one
unless the fallback keeps them literal. Anything else fancy-regex or the regex crate may refuse
(`\\p{^L}`, a bad group) is not predicted: verify reports it with the crate's own text.
tests/native/test_fancy_regex.py holds every letter, in and out of a class, to candle 0.11.1's crate.
"""

from __future__ import annotations

#: letters `parse_escape` handles wherever they are: classes (\d \s \w \h, negated), hex and unicode
#: escapes, properties, and the control characters it turns into literals
_ANYWHERE = frozenset("dDsSwWhHxuUpPafnrtveb")
#: letters it handles only outside a class (anchors, boundaries, backreferences, \K \G \O \g)
_OUTSIDE_ONLY = frozenset("kAzZBKGOg")
#: inside a class, the fallback keeps these literal instead of refusing them (parse.rs:631-634)
_LITERAL_IN_CLASS = frozenset("kAzBKG")
#: letters that need what follows them (a property name, a group): refused as the pattern's last character
_NEED_MORE = frozenset("pPg")


def refusal(pattern: str) -> str | None:
    """fancy-regex's message refusing `pattern` for an escape it does not know, else None."""
    depth, i, n = 0, 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                return None  # a trailing backslash: another refusal, not mirrored
            letter = pattern[i + 1]
            known = _known(letter, in_class=depth > 0, last=i + 2 == n)
            if letter.isascii() and letter.isalpha() and not known:
                at = len(pattern[:i].encode("utf-8"))
                return f"Parsing error at position {at}: Invalid escape: \\{letter}"
            i += 2
        elif ch == "[":
            if depth > 0 and pattern.startswith("[:", i):  # a POSIX class inside a class: [[:alpha:]]
                end = pattern.find(":]", i + 2)
                i = end + 2 if end >= 0 else n
                continue
            depth += 1
            i += 1
            i += pattern.startswith("^", i)
            i += pattern.startswith("]", i)  # `]` right after `[` or `[^` is a literal
        else:
            if ch == "]" and depth > 0:
                depth -= 1
            i += 1
    return None


def _known(letter: str, *, in_class: bool, last: bool) -> bool:
    if last and letter in _NEED_MORE:
        return False
    if letter in _ANYWHERE:
        return True
    return letter in _LITERAL_IN_CLASS if in_class else letter in _OUTSIDE_ONLY
