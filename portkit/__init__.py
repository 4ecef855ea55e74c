"""portkit: find where candle 0.11.0 reads a Hugging Face checkpoint differently from transformers 5.

`import portkit` never imports torch or transformers; only `portkit.verify` does, lazily.
"""

__version__ = "0.1.0"
