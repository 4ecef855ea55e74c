"""The distribution `generate()` draws each teacher-forced step's token from, by transformers' own
`LogitsProcessorList` (`GenerationMixin._get_logits_processor`) built from the model's
generation_config.json over generate()'s defaults, as `generate()` prepares it
(generation/utils.py:2113-2115); in the process that imports transformers.

Asked for with the reference's forward (`extra["sampling"]`, `portkit.verify.reference.extra`):

    "sampling": {"without": [key, ...]}

gives `extra.sampling` ([steps, vocab] f32: step k's probabilities after prompt + fed[:k]) and,
for each key (a setting candle has no equivalent for), `extra.sampling.without.<key>`: the same
with that setting at its off value, the counterfactual of a PK510 finding about it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from portkit.semantics.sampling import NO_EQUIVALENT_ALWAYS, NO_EQUIVALENT_WHEN_SAMPLING
from portkit.verify.reference.result import SAMPLING, SAMPLING_WITHOUT


def generation_config(model_dir: Path, without: str | None = None) -> Any:
    """generation_config.json (transformers' reader; none: GenerationConfig()) with generate()'s
    defaults filled in where it sets nothing; `without`: that setting at its off value."""
    import logging

    from transformers import GenerationConfig

    logging.getLogger("transformers.generation.configuration_utils").setLevel(logging.ERROR)
    path = Path(model_dir) / "generation_config.json"
    gc = GenerationConfig.from_pretrained(str(model_dir)) if path.is_file() else GenerationConfig()
    gc.update(**gc._get_default_generation_params(), defaults_only=True)
    if without is not None:
        off = {**NO_EQUIVALENT_ALWAYS, **NO_EQUIVALENT_WHEN_SAMPLING}
        setattr(gc, without, off[without])
    gc._eos_token_tensor = None  # min_length and the eos-forcing processors: off in verify's short run
    return gc


def processors(gc: Any, input_len: int) -> Any:
    """`generate()`'s LogitsProcessorList for `gc` (decoder-only, no custom processors)."""
    from transformers.generation.utils import GenerationMixin

    # the method reads only these of the model (decoder-only, no processors passed in)
    model = SimpleNamespace(
        config=SimpleNamespace(is_encoder_decoder=False),
        _merge_criteria_processor_list=lambda default, _custom: default,
    )
    return GenerationMixin._get_logits_processor(
        model,  # type: ignore[arg-type]  # a stand-in holding the two attributes the method reads
        gc,
        input_ids_seq_length=input_len,
        device="cpu",
        model_kwargs={},
    )


def distributions(gc: Any, prompt: Sequence[int], fed: Sequence[int], rows: np.ndarray) -> np.ndarray:
    """[steps, vocab] f32: what `_sample` draws step k's token from (generation/utils.py: the
    processors on the f32 logits, then softmax; greedy: the argmax of the processed scores)."""
    import torch

    out = np.zeros(rows.shape, dtype=np.float32)
    procs = processors(gc, len(prompt))
    for k in range(rows.shape[0]):
        ids = torch.tensor([list(prompt) + list(fed[:k])], dtype=torch.long)
        scores = procs(ids, torch.from_numpy(np.array(rows[k : k + 1], dtype=np.float32)))
        if gc.do_sample:
            out[k] = torch.softmax(scores, dim=-1)[0].numpy()
        else:
            out[k, int(torch.argmax(scores[0]))] = 1.0
    return out


def compute(
    model_dir: Path,
    prompt: Sequence[int],
    fed: Sequence[int],
    rows: np.ndarray,
    asked: Mapping[str, Any],
    progress: Callable[[str], None],
) -> dict[str, np.ndarray]:
    """The arrays `asked` names, under the extra prefix (`extra.sampling`, `extra.sampling.without.<key>`)."""
    from portkit.verify.reference.extra import PREFIX

    progress("reference: generate()'s sampling distributions")
    out = {PREFIX + SAMPLING: distributions(generation_config(model_dir), prompt, fed, rows)}
    for key in asked.get("without") or []:
        out[PREFIX + SAMPLING_WITHOUT + key] = distributions(generation_config(model_dir, key), prompt, fed, rows)
    return out
