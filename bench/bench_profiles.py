"""Load time of each bundled production-kernel profile (target: 0.5 s each), best of three.

Prints CPU and wall seconds per profile and the total size of the bundled files (target 10 MB).

    python bench/bench_profiles.py
"""

from __future__ import annotations

import json
import time

from sim.catalog import CATALOG_DIR
from sim.catalog.profiles import parse_profile

NAMES = ("h100-sglang", "h200-sglang", "h200-trtllm", "h200-vllm", "b200-sglang", "b200-trtllm")


def main() -> None:
    total = 0
    for name in NAMES:
        path = CATALOG_DIR / "profiles" / f"{name}.json"
        total += path.stat().st_size
        runs = []
        for _ in range(3):
            w0, c0 = time.perf_counter(), time.process_time()
            parse_profile(json.loads(path.read_text()), str(path))
            runs.append((time.process_time() - c0, time.perf_counter() - w0))
        cpu, wall = min(runs)
        print(f"{name:12} load: {cpu:.3f} s CPU ({wall:.3f} s wall), best of 3 (target 0.5 s)")
    print(f"bundled production-kernel profiles: {total / 1e6:.2f} MB (target 10 MB)")


if __name__ == "__main__":
    main()
