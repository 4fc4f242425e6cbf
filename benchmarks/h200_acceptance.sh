#!/usr/bin/env bash
# The GPU acceptance runs of issues 21, 22 and 24, in parts that each fit one device call (10 minutes), writing
# short summaries and the reports under $OUT (at most 8 files come back). Run from the repository root on the GPU
# machine, after the install line of ../shared/device/bundle.sh:
#
#   bash benchmarks/h200_acceptance.sh default [MODELS]   # the default run, timed (<= 180 s), then its validation
#                                                  # of MODELS (default dqn,mamba2; --factor 4 --repeats 3)
#   bash benchmarks/h200_acceptance.sh default-rest REPORT   # ppo and tft of that report (--factor 4 --repeats 3)
#   bash benchmarks/h200_acceptance.sh lm          # the 124M GPT LM at batch 64 (GPU-bound), run and validated
#   bash benchmarks/h200_acceptance.sh resnet      # ResNet-50 at batch 256 (cuDNN autotuning), run and validated
#   bash benchmarks/h200_acceptance.sh checks      # pytest -m gpu, and the memory split's batch predictions
#   bash benchmarks/h200_acceptance.sh gpu-tests   # pytest -m gpu alone, timed
#   bash benchmarks/h200_acceptance.sh revalidate REPORT MODELS NAME   # validate a stored report again (a custom
#                                                  # model's from benchmarks/user_models), e.g. after a change to
#                                                  # the bounds; the report needs its config_resolved.yaml
#                                                  # beside it (timed_run returns both: NAME-report.json and
#                                                  # NAME-config_resolved.yaml; store them as report.json and
#                                                  # config_resolved.yaml in one folder)
#
# Each run returns NAME-report.json, NAME-config_resolved.yaml and the tail of its console NAME.log.
# What the parts took on the H200 (session 10): the default run 139 s; validating its models at 4x, a training of dqn
# ~33 s, ppo ~100 s, mamba2 and tft ~53 s, plus 13-50 s a model to build and warm up (all four models' 3 repeats are
# ~12 minutes: split them over calls with `default dqn,ppo` and `revalidate REPORT mamba2,tft NAME`); lm 73 s + 177 s;
# resnet 62 s + 205 s; the memory check of tft, mamba2 and the LM 217 s (session 9). Each call also spends about 3
# minutes of the budget starting the machine, so send the next call while it is warm (30 s). VALIDATE_LIMIT_S (540)
# caps each validation and VALIDATE_REPEATS (3) sets its repeats.
#
# A part's report travels back under $OUT; `default-rest` takes the default part's report.json (on a machine still
# warm from the default part, /tmp/accept-default/report.json). Each validation runs under `timeout -s INT`, so a
# part cut short still writes the rows it trained (validate keeps them on SIGINT). Every figure a note quotes comes
# from these files, with the command that wrote them.
set -uo pipefail
part=${1:?usage: h200_acceptance.sh default [MODELS]|default-rest REPORT|lm|resnet|gpu-tests|checks|revalidate REPORT MODELS NAME}
out=${OUT:?set OUT to the folder whose files come back}
export PYTHONUNBUFFERED=1
user_models=benchmarks/user_models

timed_run() {  # timed_run NAME OVERRIDES...: one gpubench run in its own folder; its report and wall time to $OUT
  local name=$1
  shift
  local dir=/tmp/accept-$name
  local start_ns rc wall_ms
  start_ns=$(date +%s%N)
  python3 -m gpubench tracking.enabled=false "hydra.run.dir=$dir" "$@" >"$dir.log" 2>&1
  rc=$?
  wall_ms=$((($(date +%s%N) - start_ns) / 1000000))
  cp "$dir/report.json" "$out/$name-report.json" 2>/dev/null
  cp "$dir/config_resolved.yaml" "$out/$name-config_resolved.yaml" 2>/dev/null
  tail -c 20000 "$dir.log" >"$out/$name.log"
  echo "$name: rc $rc, wall $((wall_ms / 1000)).$((wall_ms % 1000 / 100)) s" | tee -a "$out/summary.txt"
  grep -E '^Recommendation|^Report' "$dir.log" | cut -c1-600 >>"$out/summary.txt"
}

validate() {  # validate REPORT MODELS NAME: --factor 4 --repeats 3, the table into the summary, at most
  # ${VALIDATE_LIMIT_S:-540} s (SIGINT: the rows trained so far are kept)
  local start_s=$SECONDS
  timeout -s INT -k 20 "${VALIDATE_LIMIT_S:-540}" python3 -m gpubench.validate "$1" --factor 4 --repeats "${VALIDATE_REPEATS:-3}" \
    --models "$2" --output "$out/validation-$3.json" >>"$out/summary.txt" 2>&1
  echo "validate $3 ($2): exit $?, $((SECONDS - start_s)) s" | tee -a "$out/summary.txt"
}

gpu_tests() {
  local start_s=$SECONDS
  python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu >"$out/gpu-tests.txt" 2>&1
  echo "pytest -m gpu: exit $?, $((SECONDS - start_s)) s" | tee -a "$out/summary.txt"
}

case $part in
  default)
    timed_run default
    validate /tmp/accept-default/report.json "${2:-dqn,mamba2}" default-a
    ;;
  default-rest)
    validate "${2:?give the report.json of the default part}" ppo,tft default-b
    ;;
  lm)
    (cd "$user_models" && timed_run lm model=custom workloads.custom.factory=gpt_language_model:build \
      workloads.custom.batch_size=64 workloads.custom.samples_per_step=32768 workloads.custom.sample_unit=token \
      decision.plan.samples.custom=2e9)
    (cd "$user_models" && validate /tmp/accept-lm/report.json custom lm)
    ;;
  resnet)
    (cd "$user_models" && timed_run resnet model=custom workloads.custom.factory=resnet50_classifier:build \
      workloads.custom.batch_size=256 workloads.custom.sample_unit=image decision.plan.samples.custom=1.28e8)
    (cd "$user_models" && validate /tmp/accept-resnet/report.json custom resnet)
    ;;
  revalidate)
    report=$(realpath "${2:?give a report.json}")
    if [ "${3:?give the models}" = custom ]; then
      (cd "$user_models" && validate "$report" custom "${4:?give a name}")
    else
      validate "$report" "$3" "${4:?give a name}"
    fi
    ;;
  gpu-tests)
    gpu_tests
    ;;
  checks)
    gpu_tests
    python3 benchmarks/memory_fit_check.py --json "$out/memory-fit.json" >>"$out/summary.txt" 2>&1
    echo "memory_fit_check: exit $?" | tee -a "$out/summary.txt"
    ;;
  *)
    echo "unknown part $part" >&2
    exit 2
    ;;
esac
