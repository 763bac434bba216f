#!/usr/bin/env bash
# Fetch the wheels a bare CUDA machine lacks for `tools/gpu_calibrate.sh` into .whl/ (git-ignored
# via .git/info/exclude), so they can travel with the working tree. Run here, where PyPI is
# reachable. PY: the device's Python version (default 3.12).
set -euo pipefail
py="${PY:-3.12}"
rm -rf .whl && mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" \
  --implementation cp --platform manylinux_2_17_x86_64 -d .whl \
  pydantic pydantic-core annotated-types typing-inspection typing-extensions
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
ls .whl
