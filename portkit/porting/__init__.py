"""The porting kit: `portkit reference` writes transformers' values to a safetensors dump,
`portkit compare` judges any candidate dump against it with verify's comparisons, and the Rust
crate `native/portkit-dump` lets a user's own candle program write that candidate.

The layout (`portkit.porting.dumpfile`): `ids` [T], `embeddings`, `layer.N` and `norm`
[T, hidden], `layer.N.<sub-layer>` [T, features] (each submodule of the decoder layer, named by
transformers' attribute path: `portkit.families.sublayers`), `logits` [T, vocab] (or only the
last position, [vocab]), `greedy` [N]; the reference also keeps `greedy.logits` [N, vocab], its
logits where it chose each greedy token.
"""
