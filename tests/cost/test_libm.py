"""Results do not depend on the CPU: no numpy transcendental ufunc in the simulator's code (on
AVX-512 numpy computes them with SVML, which differs from the C library in the last bit;
`sim.cost.libm`), and the replacements give the C library's values."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from sim.cost.experts import zipf_popularity
from sim.cost.libm import logs

SIM = Path(__file__).resolve().parents[2] / "sim"
# numpy's ufuncs with SVML kernels on AVX-512 (numpy/numpy#19478)
SVML = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "power", "float_power", "cbrt",
        "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh",
        "arcsinh", "arccosh", "arctanh")  # fmt: skip
# and BLAS, whose kernels differ between CPUs too
CALL = re.compile(r"\bnp\.((" + "|".join((*SVML, "dot", "matmul", "inner")) + r")\(|linalg\.)")
REFERENCE = {"mla_reference.py"}  # the tests' reference attention, not a price


def test_no_numpy_transcendental_ufunc_or_blas_call_in_sim() -> None:
    found = [
        f"{p.relative_to(SIM)}:{i}: {line.strip()}"
        for p in sorted(SIM.rglob("*.py"))
        if p.name not in REFERENCE
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if CALL.search(line.split("#", 1)[0])  # code, not a comment naming one
    ]
    assert not found, "use math (sim.cost.libm) instead:\n" + "\n".join(found)


def test_logs_is_the_c_librarys_log() -> None:
    x = np.random.default_rng(3).uniform(1e-9, 1e6, 2_000)
    assert logs(x).tolist() == [math.log(v) for v in x.tolist()]


def test_the_popularity_law_is_python_floats_power() -> None:
    p = zipf_popularity(256, 0.77)
    w = [float(r) ** -0.77 for r in range(1, 257)]
    assert sorted(p.tolist()) == sorted((np.array(w) / np.sum(w)).tolist())
