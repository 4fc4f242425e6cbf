#!/usr/bin/env bash
# The default run (`python -m gpubench`, the four models) timed on the device with bytecode cached (as on an
# installed machine), its summary and report to $OUT. Run from the repository root.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD || exit
unset PYTHONDONTWRITEBYTECODE; export PYTHONPYCACHEPREFIX=/tmp/pyc PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/summary.txt"
git log -1 --format='commit %h' 2>/dev/null | tee -a "$OUT/summary.txt"
python3 -c "import gpubench.bench.runner, gpubench.output.plots, matplotlib.pyplot"
start=$(date +%s%N)
python3 -m gpubench tracking.enabled=false hydra.run.dir=/tmp/run-default >/tmp/default.log 2>&1
echo "default run: rc $?, wall $((($(date +%s%N) - start) / 1000000)) ms" | tee -a "$OUT/summary.txt"
grep -E "^Recommendation|round [0-9]+:|settle|cannot" /tmp/default.log | cut -c1-400 | tee -a "$OUT/summary.txt"
cp /tmp/run-default/report.json /tmp/run-default/gpubench.log "$OUT/"
