"""`portkit verify`: candle's real code (portkit_native) next to transformers, with numbers.

Importing this package is cheap; torch/transformers load only inside `reference`, and the
native wheel only inside `candle`.
"""
