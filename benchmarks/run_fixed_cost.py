"""Where a run's time goes that is not its measured epochs: the fixed cost of ``gpubench model=tft epochs=20``.

    python benchmarks/run_fixed_cost.py [--runs 2] [OVERRIDE ...]     # default overrides: model=tft epochs=20

Runs the command ``--runs`` times, one after another, each in a fresh folder with tracking off, and prints per run
the wall time and its phases, read from the run's own log (``gpubench.log``, one timestamped line per phase) and
report: start-up (interpreter, imports, config) up to the log's first line, the burn-in, the data, each model's
batch decision (the search's and verification's trials, with the seconds their steps took, and the rest: building
each trial's model, freeing memory, counting the step's FLOPs, the recurring costs), the rounds (warmup and measured
epochs, with the epochs' own seconds), and the end (recommendation, plots, page and report) after the last round.
The first run on a fresh machine also pays Python's bytecode compilation and matplotlib's font cache; later runs
are what a user sees every time.
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

DEFAULT_OVERRIDES = ("model=tft", "epochs=20")
_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[[^]]*\]\[[A-Z]+\] - (.*)$")


def log_lines(path: Path) -> list[tuple[float, str]]:
    """(seconds since the epoch, message) of each timestamped line of a gpubench log."""
    lines = []
    for line in path.read_text().splitlines():
        match = _LINE.match(line)
        if match:
            stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            lines.append((stamp, match.group(2)))
    return lines


def first_time(lines: list[tuple[float, str]], pattern: str) -> float | None:
    return next((stamp for stamp, message in lines if re.search(pattern, message)), None)


def phases(start_s: float, end_s: float, folder: Path) -> list[tuple[str, float]]:
    """The run's phases (name, seconds), from its log and report in ``folder``."""
    lines = log_lines(folder / "gpubench.log")
    report = json.loads((folder / "report.json").read_text())
    rows: list[tuple[str, float]] = []
    first, last = lines[0][0], lines[-1][0]
    rows.append(("start-up: interpreter, imports, config", first - start_s))
    burn_in = first_time(lines, r"^burn-in")
    data = first_time(lines, r"^data:")
    if burn_in is not None and data is not None:
        rows.append(("burn-in", data - burn_in))
    for name, result in report["models"].items():
        started = first_time(lines, rf"^model {name}: started")
        measuring = first_time(lines, rf"^model {name}: measuring at batch")
        if started is None or measuring is None:
            continue
        search = result.get("batch_search") or {}
        trials = search.get("trials", [])
        trial_s = sum(t.get("seconds") or 0.0 for t in trials)
        rows.append((f"{name}: batch decision, all", measuring - started))
        rows.append((f"{name}:   {len(trials)} trials' steps", trial_s))
        rows.append((f"{name}:   the rest (builds, freeing, counting, recurring costs)", measuring - started - trial_s))
        epochs_s = sum(result["raw_epoch_times_ms"]) / 1e3
        rows.append((f"{name}: measured epochs ({len(result['raw_epoch_times_ms'])})", epochs_s))
    rounds = [stamp for stamp, message in lines if re.search(r"^round \d+:|: ok, mean epoch", message)]
    last_round = max(rounds, default=None)
    measuring_all = first_time(lines, r"measuring at batch")
    if last_round is not None and measuring_all is not None:
        rows.append(("rounds: warmups and epochs, all models", last_round - measuring_all))
        rows.append(("end: recommendation, plots, page, report", end_s - last_round))
    rows.append(("log span", last - first))
    return rows


def run_once(overrides: list[str]) -> tuple[float, list[tuple[str, float]]]:
    folder = Path(tempfile.mkdtemp(prefix="gpubench-fixed-cost-"))
    command = [sys.executable, "-m", "gpubench", "tracking.enabled=false", f"hydra.run.dir={folder}", *overrides]
    start_s = time.time()
    completed = subprocess.run(command, capture_output=True, text=True)
    end_s = time.time()
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {completed.returncode}: {completed.stderr[-2000:]}")
    return end_s - start_s, phases(start_s, end_s, folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("overrides", nargs="*", default=list(DEFAULT_OVERRIDES))
    args = parser.parse_args(argv)
    results = [run_once(args.overrides) for _ in range(args.runs)]
    names = [name for name, _ in results[0][1]]
    print(f"{'phase':<62}" + "".join(f"{f'run {i + 1} s':>10}" for i in range(len(results))))
    for name in names:
        cells = "".join(f"{dict(rows).get(name, float('nan')):>10.2f}" for _, rows in results)
        print(f"{name:<62}{cells}")
    print(f"{'wall':<62}" + "".join(f"{wall:>10.2f}" for wall, _ in results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
