"""$ per GPU-hour and what a plan costs: $/hour and $ per million output tokens.

The default table is public on-demand list prices for one GPU, with their page and the date it
was read. Prices move and differ by provider and commitment (spot, reserved): pass
`--gpu-hour-usd` for your own. A GPU without a public per-GPU price here (H20, H800, sold mainly
in China) has none: its $ columns stay empty until a price is given.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPrice:
    usd_per_gpu_hour: float
    source: str


DEFAULT_PRICES: dict[str, GpuPrice] = {
    "h200": GpuPrice(4.54, "Spheron on-demand H200 SXM, 'as of 17 March 2026', "
                     "https://www.spheron.network/blog/nvidia-h200-vs-b200-vs-gb200"),
    "b200": GpuPrice(6.03, "Spheron on-demand B200, 'as of 17 March 2026', "
                     "https://www.spheron.network/blog/nvidia-h200-vs-b200-vs-gb200"),
    "h100": GpuPrice(1.49, "GPUaaS.com on-demand H100 'starts at $1.49/GPU/hr', 26 May 2026, "
                     "https://gpuaas.com/blog/h200-vs-h100-rental-decision-guide-2026"),
}  # fmt: skip


def gpu_price(gpu: str, override_usd: float | None = None) -> GpuPrice | None:
    """The price to use for `gpu`: the override, else the table's, else None."""
    if override_usd is not None:
        return GpuPrice(override_usd, "--gpu-hour-usd")
    return DEFAULT_PRICES.get(gpu)


def usd_per_hour(gpus: int, price: GpuPrice | None) -> float | None:
    return None if price is None else gpus * price.usd_per_gpu_hour


def usd_per_million_tokens(usd_hour: float | None, output_tok_s: float | None) -> float | None:
    """$ per million output tokens at the plan's output rate."""
    if usd_hour is None or not output_tok_s:
        return None
    return usd_hour / (output_tok_s * 3600.0) * 1e6
