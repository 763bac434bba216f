"""One colour per op, the same on every page and figure."""

from __future__ import annotations

import hashlib

# one colour per op, the same on every page and figure: the ops the cost model names, in a
# fixed order, each its own colour of a 26-colour palette; an op not listed takes one by a
# stable hash of its name (Python's hash() changes between processes)
OP_PALETTE = (
    "#3283FE",
    "#F6222E",
    "#1C8356",
    "#FEAF16",
    "#782AB6",
    "#16FF32",
    "#85660D",
    "#FE00FA",
    "#2ED9FF",
    "#C4451C",
    "#565656",
    "#90AD1C",
    "#B00068",
    "#1CFFCE",
    "#325A9B",
    "#F8A19F",
    "#AA0DFE",
    "#FBE426",
    "#1CBE4F",
    "#DEA0FD",
    "#B10DA1",
    "#C075A6",
    "#FC1CBF",
    "#F7E1A0",
    "#E2E2E2",
    "#FA0087",
)  # Plotly's qualitative "Alphabet" palette, reordered so neighbours differ
KNOWN_OPS = (
    "attn_proj", "attn_decode", "attn_prefill", "mla_bmm", "dsa_indexer", "kv_store",
    "tp_allreduce", "dp_gather", "dense_mlp", "moe_gate", "moe_shared", "moe_routed",
    "moe_elementwise", "ep_dispatch", "ep_combine", "elementwise", "lm_head", "mtp_draft",
    "mtp_draft_moe", "mtp_draft_comm", "mtp_prefill", "mtp_prefill_moe", "mtp_prefill_comm",
    "kda", "sampling", "kernel_launch",
)  # fmt: skip


def op_colour(op: str) -> str:
    """The op's colour on every chart."""
    if op in KNOWN_OPS:
        return OP_PALETTE[KNOWN_OPS.index(op)]
    digest = hashlib.sha1(op.encode()).digest()
    return OP_PALETTE[int.from_bytes(digest[:4], "big") % len(OP_PALETTE)]
