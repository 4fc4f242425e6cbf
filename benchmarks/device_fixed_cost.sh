#!/usr/bin/env bash
# One device call on the run's fixed cost: `model=tft epochs=20` timed twice with its phases, once under cProfile
# (cumulative and own-time tables), then `pytest -m gpu`. Run from the repository root after the install line of
# ../shared/device/bundle.sh; writes summaries to $OUT.
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/summary.txt"
nproc | sed 's/^/cpus: /' | tee -a "$out/summary.txt"
git log -1 --format='commit %h %s' 2>/dev/null | tee -a "$out/summary.txt"
python3 benchmarks/run_fixed_cost.py --runs 2 model=tft epochs=20 >"$out/fixed_cost.txt" 2>&1
python3 -m cProfile -o /tmp/tft.prof -m gpubench tracking.enabled=false hydra.run.dir=/tmp/run-prof \
  model=tft epochs=20 >/tmp/prof.log 2>&1
echo "tft under cProfile: rc $?" | tee -a "$out/summary.txt"
cp /tmp/run-prof/gpubench.log "$out/prof_gpubench.log"
python3 - <<'PY' >"$out/profile.txt"
import pstats
p = pstats.Stats("/tmp/tft.prof")
p.sort_stats("cumulative").print_stats(110)
p.sort_stats("tottime").print_stats(40)
PY
timeout "${GPU_TESTS_SECONDS:-280}" python3 -m pytest -m gpu -q -rf --durations=25 tests/gpu >"$out/pytest_gpu.txt" 2>&1
echo "pytest -m gpu: rc $?" | tee -a "$out/summary.txt"
