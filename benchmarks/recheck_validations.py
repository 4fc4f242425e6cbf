"""Set stored validations (``gpubench.validate``'s ``validation.json``) beside the bounds today's code computes from
the same reports: the trainings were measured once, on the GPU; the bounds are arithmetic on the report, so a change
to the statistics can be checked against the real trainings without the GPU.

    python benchmarks/recheck_validations.py REPORT VALIDATION [REPORT VALIDATION ...]

VALIDATION may also be a file of several named validations (``{"name": validation, ...}``, as stored in
``benchmarks/results/*-validations.json``) with ``REPORT:name`` pairs: ``report.json validations.json:lm``.
The replay's plan is the default training plan (a replay sets its own samples and runs no validation passes or
checkpoints, so the report's plan keys do not enter), as gpubench.validate builds it.
"""

import argparse
import json
from pathlib import Path

from gpubench.bench.replay import replay_estimate
from gpubench.decision.config import TrainingPlanConfig
from gpubench.decision.estimate import new_training_bounds_seconds
from gpubench.results import RunReport
from gpubench.results.units import SECONDS_PER_HOUR


def _validation(spec: str) -> dict:
    path, _, name = spec.partition(":")
    data = json.loads(Path(path).read_text())
    return data[name] if name else data


def rows(report_path: Path, validation: dict) -> list[str]:
    """One line per finished training: the stored bound, today's bound, the actual time and whether it is inside."""
    report = RunReport.from_dict(json.loads(report_path.read_text()))
    lines = []
    for check in validation["checks"]:
        if check["status"] != "ok" or check.get("actual_s") is None:
            continue
        result = report.models[check["model"]]
        estimate = replay_estimate(check["model"], result, TrainingPlanConfig(), check["epochs"])
        lower_s, upper_s = new_training_bounds_seconds(estimate, result)
        predicted_s = estimate.hours * SECONDS_PER_HOUR
        actual_s = check["actual_s"]
        error_pct = (actual_s / predicted_s - 1) * 100
        lines.append(
            f"{check['model']:<8}{check['repeat']:>4}  [{check['lower_s']:7.1f}, {check['upper_s']:7.1f}]  "
            f"{predicted_s:8.1f}  [{lower_s:7.1f}, {upper_s:7.1f}]  {(lower_s / predicted_s - 1) * 100:+7.1f}% "
            f"{(upper_s / predicted_s - 1) * 100:+6.1f}%  {actual_s:8.1f}  {error_pct:+7.2f}%  "
            f"{'yes' if lower_s <= actual_s <= upper_s else 'NO'}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="+", help="REPORT VALIDATION[:name] pairs")
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give REPORT VALIDATION pairs")
    print("model    rep  stored bound s        predicted  bound s today        lower   upper   actual s   error  in")
    for report, validation in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        print(f"# {report}")
        for line in rows(Path(report), _validation(validation)):
            print(line)


if __name__ == "__main__":
    main()
