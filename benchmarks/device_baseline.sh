#!/usr/bin/env bash
# One device call's baseline for issues 30 and 31: `model=tft epochs=20` timed plainly and under cProfile (where the
# run's fixed cost goes), then the default run, the GPT LM and ResNet-50 (the cross-card configs), each report and
# the summaries to $OUT. Run from the repository root after the install line of ../shared/device/bundle.sh.
set -uo pipefail
out=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/summary.txt"
nproc | sed 's/^/cpus: /' | tee -a "$out/summary.txt"
timed() {  # timed NAME DIR ARGS...: wall time of one gpubench run
  local name=$1 dir=$2; shift 2
  local start=$(date +%s%N)
  python3 -m gpubench tracking.enabled=false "hydra.run.dir=/tmp/run-$name" "$@" >"/tmp/run-$name.log" 2>&1
  local rc=$? ms=$((($(date +%s%N) - start) / 1000000))
  echo "$name: rc $rc, wall $ms ms" | tee -a "$out/summary.txt"
  grep -E '^Recommendation' "/tmp/run-$name.log" | cut -c1-300 >>"$out/summary.txt"
  mkdir -p "/tmp/keep/$name"; cp /tmp/run-$name/report.json /tmp/run-$name/config_resolved.yaml \
    /tmp/run-$name/gpubench.log "/tmp/keep/$name/" 2>/dev/null; tail -c 20000 "/tmp/run-$name.log" >"/tmp/keep/$name/console.log"
  (cd /tmp && tar czf "$out/runs.tar.gz" keep)
}
timed tft . model=tft epochs=20
start=$(date +%s%N)
python3 -X importtime -c "import gpubench.bench.runner" 2>/tmp/imp.txt
sort -t'|' -k2 -n /tmp/imp.txt | tail -25 >"$out/importtime.txt"
python3 -m cProfile -o /tmp/tft.prof -m gpubench tracking.enabled=false hydra.run.dir=/tmp/run-prof model=tft epochs=20 >/tmp/prof.log 2>&1
echo "tft under cProfile: rc $?, $((($(date +%s%N) - start) / 1000000)) ms" | tee -a "$out/summary.txt"
python3 - <<'PY' >"$out/profile.txt"
import pstats
p = pstats.Stats("/tmp/tft.prof"); p.sort_stats("cumulative").print_stats(90)
PY

timed default .
(cd benchmarks/user_models && timed lm . model=custom workloads.custom.factory=gpt_language_model:build \
  workloads.custom.batch_size=64 workloads.custom.samples_per_step=32768 workloads.custom.sample_unit=token \
  decision.plan.samples.custom=2e9)
(cd benchmarks/user_models && timed resnet . model=custom workloads.custom.factory=resnet50_classifier:build \
  workloads.custom.batch_size=256 workloads.custom.sample_unit=image decision.plan.samples.custom=1.28e8)
(cd /tmp && tar czf "$out/runs.tar.gz" keep)
