"""Dense MLP layers split over the whole unit, as SGLang places them under DP attention.

With `dense_ffn: unit` (SGLang's default, `--moe-dense-tp-size` unset), every GPU of the unit
holds 1/GPUs of each dense layer's gate_up and down projections. In each dense layer the DP
ranks' hidden states are gathered into one buffer on every GPU, every GPU runs its slice of
the MLP over all of it, and the partial outputs are summed and each rank takes its own rows
back (`sim.cost.comm_ops.dp_gather`: the buffer padded to the largest rank or not). The two
collectives sit on every rank's path (the gather waits for the slowest rank); two-batch overlap
leaves them exposed (it hides the EP exchange only). The SiLU between the GEMMs stays with each
rank's kernels: over the gathered rows at 1/GPUs of the width it is a rank's rows at 1/attn_tp.
"""

from __future__ import annotations

from sim.cost.comm_load import CommLoad
from sim.cost.comm_ops import dp_gather
from sim.cost.layer_ops import RankContext, gemm
from sim.cost.pricing import Pricer
from sim.cost.rate import ZERO, OpTime, combine, scale
from sim.specs.deployment import Deployment
from sim.specs.gpu import GpuSpec


def unit_dense_ops(
    pr: Pricer, c: RankContext, d: Deployment, g: GpuSpec, load: CommLoad
) -> dict[str, OpTime]:
    """`dense_mlp` (this GPU's slice over the gathered rows) and `dense_gather` (the gather in,
    the summed outputs back out) of all the model's dense layers in one step."""
    m = c.model
    layers = m.moe.first_dense_layers
    if layers == 0 or load.unit_tokens <= 0:
        return {"dense_mlp": ZERO, "dense_gather": ZERO}
    gathered = dp_gather(pr, m, d, g, load, d.gpus)
    h, width = m.hidden_size, m.moe.dense_intermediate_size // d.gpus
    rows = gathered.rows
    mlp = combine(gemm(pr, c, rows, h, 2 * width), gemm(pr, c, rows, width, h))
    return {"dense_mlp": scale(mlp, layers), "dense_gather": scale(gathered.op, layers)}
