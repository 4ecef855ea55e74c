"""The texts verify embeds: different lengths, so that one padded batch has real padding in every
row but the longest, and a mean pooled over pads differs from one over the text."""

from __future__ import annotations

#: (text, what it exercises)
TEXTS: tuple[tuple[str, str], ...] = (
    ("Hello world", "short"),
    ("The cat sits on the mat.", "short"),
    ("A man is playing a guitar on a stage in front of a large crowd.", "sentence"),
    ("How many people live in Berlin?", "question"),
    ("Émoji 🤗 and ünïcode: naïve café, 3.14159 and 2026-12-02.", "unicode"),
    (
        "Embedding models turn a whole text into one vector: every token of this longer paragraph is read "
        "by each encoder layer, attends to every other token, and is then pooled with the others, so a "
        "difference anywhere in the sequence reaches the sentence embedding that a search index stores.",
        "paragraph",
    ),
)
