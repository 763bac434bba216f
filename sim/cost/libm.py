"""Transcendental functions of arrays, computed the same on every CPU.

On CPUs with AVX-512 numpy computes `exp`, `log`, `power` and the other transcendental ufuncs
with its SVML kernels (numpy/numpy#19478), whose results differ from the C library's in the
last bit (numpy/numpy#23523); elsewhere numpy calls the C library. A price read through one of
them could then move a run's results between machines (a bucket edge crossed, a step a
nanosecond longer). The simulator computes these functions with Python's `math` (the C
library) instead, element by element, on the few small arrays that need them (a table's
slice, the expert popularity law), and its buckets from exact tables (`sim.cost.memo`).
`tests/cost/test_libm.py` keeps numpy's transcendental ufuncs out of `sim/`, and BLAS calls (whose
kernels differ between CPUs too: `sim.search.pd_capacity` sums instead of `np.dot`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray


def logs(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """The natural log of each element (positive), as `math.log` gives it."""
    return np.array([math.log(v) for v in x.tolist()], dtype=np.float64)
