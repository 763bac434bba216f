"""Sampling the next token from each logits row: memory-bound passes over the vocabulary.

After the head's GEMM, every logits row a step produces (a decode or verify token, a prefill
chunk that completes its prompt) goes through these kernels on the rank that owns it, whatever
GPUs computed its slice of the vocabulary (the head's all-gather gives each rank whole rows).
They read and write the whole vocabulary of every row, so they are priced by their bytes as the
other memory-bound kernels are (`sim.cost.elementwise.kernel_time`: a measured elementwise table
where the profile has one, else the roofline fallback with the engine's per-kernel figure).

The sequence is SGLang's (sgl-project/sglang, `python/sglang/srt/layers/logits_processor.py`
and `sampler.py`), for requests that sample at a temperature (SGLang's default temperature is
1.0, so not every request is greedy), with `V` the vocabulary and bytes per vocabulary entry:

- the logits processor's cast of the BF16 logits to FP32 (`logits[:, :vocab_size].float()`):
  2 B read, 4 B written;
- the temperature, in place (`logits.div_(temperatures)`): 4 + 4 B;
- the softmax (`torch.softmax`): 4 + 4 B, and its copy back into the logits buffer
  (`logits[:] = ...`): 4 + 4 B;
- the top-k / top-p sampling from the probabilities (`top_k_top_p_sampling_from_probs`,
  sgl_kernel): one read of the row, 4 B (its rejection rounds re-read a row from L2; the
  token id it writes is 4 B a row, left out).

34 B per vocabulary entry and row in five kernels: DeepSeek-V3's 129,280 entries make 4.40 MB a
row, 1.13 GB for 256 rows per GPU: 0.55 ms on an H100 through the h800-published roofline. An
all-greedy batch would run an argmax instead (10 B with the cast); it is not modelled, and
neither are logprobs, penalties or grammar masks, which add passes over the same rows.
"""

from __future__ import annotations

from sim.cost.elementwise import Kernel, price
from sim.cost.layer_ops import RankContext
from sim.cost.ops import BF16
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime

FP32 = 4.0

# bytes per vocabulary entry of one logits row, kernel by kernel (module docstring)
SAMPLING_PASSES: tuple[tuple[str, float], ...] = (
    ("logits_to_fp32", BF16 + FP32),
    ("temperature", 2 * FP32),
    ("softmax", 2 * FP32),
    ("softmax_copy", 2 * FP32),
    ("top_k_top_p_sample", FP32),
)


def sampling_kernels(vocab_size: int, rows: float) -> list[Kernel]:
    """The kernels that turn `rows` logits rows of `vocab_size` entries into token ids."""
    return [
        Kernel(name=name, tokens=rows, bytes_per_token=per_entry * vocab_size)
        for name, per_entry in SAMPLING_PASSES
    ]


def sampling(pr: Pricer, c: RankContext, rows: float) -> OpTime:
    """A rank's sampling of its `rows` logits rows in one step (none without rows)."""
    if rows <= 0:
        return ZERO
    return price(pr, sampling_kernels(c.model.vocab_size, rows))
