#!/usr/bin/env bash
# `model=tft epochs=20` under cProfile with bytecode cached (as on an installed machine), then its phases twice.
# Run from the repository root on the device; writes to $OUT.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
python3 -m gpubench tracking.enabled=false hydra.run.dir=/tmp/warm model=tft epochs=20 > /tmp/warm.log 2>&1
python3 -m cProfile -o /tmp/tft.prof -m gpubench tracking.enabled=false hydra.run.dir=/tmp/run-prof model=tft epochs=20 > /tmp/prof.log 2>&1
cp /tmp/run-prof/gpubench.log $OUT/prof_gpubench.log
python3 - <<'PY' > $OUT/profile_gpubench.txt
import pstats
p = pstats.Stats("/tmp/tft.prof")
p.sort_stats("cumulative").print_stats("gpubench/", 120)
p.sort_stats("tottime").print_stats(50)
PY
python3 benchmarks/run_fixed_cost.py --runs 2 model=tft epochs=20 > $OUT/fixed.txt 2>&1
cat $OUT/fixed.txt
