#!/usr/bin/env bash
# One prepared run of the calibration on a CUDA machine (e.g. a lent H200), writing under $OUT:
#   h200-measured.json (the profile), h200-measured-quick.json, h200-measured-report.txt,
#   machine.txt (GPU and plan), sizing.txt (wall time of the quick and default runs),
#   calibrate-*.log, gpu-tests.txt: eight files, what a lent machine sends back at most.
# The whole script ends within about 560 s (a lent machine's command runs 600 s at most).
#
# The machine needs torch with CUDA, numpy, pyyaml, rich and pydantic. Where pydantic is missing,
# run `bash tools/device_wheels.sh` here first (fetches its wheels into git-ignored .whl/) and
# carry `.whl` with the run; this script installs whatever lies in .whl/.
# Usage (repo root): OUT=/some/dir bash tools/gpu_calibrate.sh [NAME]   (NAME default h200-measured)
# DEVICE=cpu runs the same steps on tiny CPU shapes (to try the script without a GPU).
set -euo pipefail
name="${1:-h200-measured}"
out="${OUT:?set OUT to the folder that receives the profile}"
device="${DEVICE:-cuda}"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | tee "$out/machine.txt" || true
python3 -m kernels_calib plan --device "$device" | tee -a "$out/machine.txt"
# --quick first (sized for 1 min), then the default grid (sized for 5 min; no point starts after
# 300 s, the profile keeps what was measured and says what was not; SIGTERM from `timeout`
# stops it the same way). Wall times go to sizing.txt.
for mode in quick default; do
  file="$out/$name.json"; flags=(--time-limit-s 300); cap=340
  if [ "$mode" = quick ]; then file="$out/$name-quick.json"; flags=(--quick --time-limit-s 75); cap=100; fi
  start=$SECONDS
  timeout -k 10 "$cap" python3 -m kernels_calib --device "$device" "${flags[@]}" --out "$file" 2>&1 \
    | tee "$out/calibrate-$mode.log" || true
  budget=300; [ "$mode" = quick ] && budget=60
  echo "$mode: $((SECONDS - start)) s wall (budget $budget s)" | tee -a "$out/sizing.txt"
  python3 -c 'import json, sys
print(*(n for n in json.load(open(sys.argv[1]))["notes"] if n.startswith("wall time per")))' \
    "$file" 2>/dev/null | tee -a "$out/sizing.txt" || true
done
test -f "$out/$name.json" || { echo "no profile written: see $out/calibrate-default.log"; exit 1; }
python3 -m kernels_calib report "$out/$name.json" --all > "$out/$name-report.txt" 2>&1
tail -n 40 "$out/$name-report.txt"
# last, where pytest is installed and time is left: the GPU-marked tests (they repeat a quick
# CUDA calibration)
left=$((560 - SECONDS))
if [ "$left" -lt 60 ]; then echo "GPU tests not run: $left s left" | tee "$out/gpu-tests.txt"; exit 0; fi
timeout "$left" python3 -m pytest tests/kernels_calib/test_gpu.py tests/kernels_calib/test_mla_triton.py -m gpu -q -p no:cacheprovider 2>&1 \
  | tee "$out/gpu-tests.txt" || true
