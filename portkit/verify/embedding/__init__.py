"""`portkit verify` on an embedding model: a candle encoder module (bert.rs and its kin) plus the
sentence-transformers pipeline around it (pooling, Dense, Normalize), against
sentence-transformers' own `SentenceTransformer` in the same run.

One flat run (`run.verify_embedding`): read the pipeline, tokenize the corpus once with
transformers' tokenizer (sentence-transformers' `preprocess`), compute the reference in f32 and
the truth in f64 (the same modules, `.double()`), run candle's module through the native wheel on
the same ids, pool and normalise as the pipeline says (`pooling`), and judge each text, each layer
and one padded batch on tolerances measured in the run (`judge`), then the lint findings by their
counterfactuals (a mask not passed, pooling over pads, half precision). docs/embeddings.md.
"""
