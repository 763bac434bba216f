#!/usr/bin/env bash
# One prepared run of the calibration on a CUDA machine (e.g. a lent H200), writing under $OUT:
#   h200-measured.json (the profile), h200-measured-report.txt, gpu-tests.txt, calibrate.log.
#
# The machine needs torch with CUDA, numpy, pyyaml, rich and pydantic. Where pydantic is missing,
# run `bash tools/device_wheels.sh` here first (fetches its wheels into git-ignored .whl/) and
# carry `.whl` with the run; this script installs whatever lies in .whl/.
# Usage (repo root): OUT=/some/dir bash tools/gpu_calibrate.sh [NAME]   (NAME default h200-measured)
set -euo pipefail
name="${1:-h200-measured}"
out="${OUT:?set OUT to the folder that receives the profile}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/gpu.txt"
# the GPU-marked tests first: a --quick CUDA calibration (its duration checks the 1 min sizing)
python3 -m pytest tests/calib -m gpu -q -p no:cacheprovider --durations=5 2>&1 \
  | tee "$out/gpu-tests.txt" || true
# the default grid, sized for 5 min: no point starts after 300 s (the profile keeps what was
# measured and says what was not); SIGTERM from `timeout` stops it the same way
timeout -k 20 400 python3 -m kernels_calib --device cuda --time-limit-s 300 \
  --out "$out/$name.json" 2>&1 | tee "$out/calibrate.log" || true
test -f "$out/$name.json" || { echo "no profile written: see $out/calibrate.log"; exit 1; }
python3 -m kernels_calib report "$out/$name.json" --all > "$out/$name-report.txt" 2>&1
tail -n 40 "$out/$name-report.txt"
