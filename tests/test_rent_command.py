"""``gpubench rent`` end to end on stored reports of one training measured on two machines (the GPT LM on an H100
and an H200): measured rows for the two cards, projected rows for the rest; bad input is exit 2."""

import json
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).parents[1] / "benchmarks" / "results"
H100_LM = RESULTS / "2026-12-06-h100-lm" / "report.json"
H200_LM = RESULTS / "2026-12-03-h200-s10-lm" / "report.json"
H100_RESNET = RESULTS / "2026-12-06-h100-resnet" / "report.json"


def rent(*args: str, cwd: Path, module: tuple[str, ...] = ("gpubench", "rent")) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", *module, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_rent_gives_measured_rows_for_the_cards_measured_and_projected_rows_for_the_rest(tmp_path: Path) -> None:
    out = tmp_path / "table.json"
    completed = rent(str(H100_LM), str(H200_LM), "--json", str(out), cwd=tmp_path)
    assert completed.returncode == 0, completed.stderr
    rows = json.loads(out.read_text())
    by_card: dict[str, set[str]] = {}
    for row in rows:
        by_card.setdefault(row["gpu"], set()).add(row["basis"].split(" (")[0])
    assert by_card["h100"] == {"measured on NVIDIA H100 80GB HBM3"}
    assert by_card["h200"] == {"measured on NVIDIA H200"}
    others = {card: bases for card, bases in by_card.items() if card not in ("h100", "h200")}
    assert len(others) >= 6 and all(
        len(b) == 1 and next(iter(b)).startswith("projected from h") for b in others.values()
    )
    # A measured row's hours are that machine's own estimate: the report's on-demand hours on its card.
    h100 = next(row for row in rows if row["gpu"] == "h100" and not row["spot"])
    stored = json.loads(H100_LM.read_text())["recommendation"]["estimated_full_training_hours"]
    assert h100["hours"] == stored or abs(h100["hours"] / stored - 1) < 1e-6
    assert "measured on NVIDIA H100" in completed.stdout and "projected from" in completed.stdout


def test_reports_of_two_trainings_are_refused_in_one_paragraph(tmp_path: Path) -> None:
    completed = rent(str(H100_LM), str(H100_RESNET), cwd=tmp_path)
    assert completed.returncode == 2
    assert "measured another training" in completed.stderr and "Traceback" not in completed.stderr
    assert len(completed.stderr.strip().splitlines()) == 1


def test_a_missing_report_is_exit_2(tmp_path: Path) -> None:
    completed = rent(str(tmp_path / "nope.json"), cwd=tmp_path)
    assert completed.returncode == 2 and "nope.json" in completed.stderr and "Traceback" not in completed.stderr


def test_python_dash_m_gpubench_rent_is_the_same_command(tmp_path: Path) -> None:
    plain = rent(str(H100_LM), str(H200_LM), "--json", str(tmp_path / "a.json"), cwd=tmp_path)
    alias = rent(
        str(H100_LM), str(H200_LM), "--json", str(tmp_path / "b.json"), cwd=tmp_path, module=("gpubench.rent",)
    )
    assert alias.returncode == plain.returncode == 0, alias.stderr
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
