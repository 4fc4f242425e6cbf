"""The README's examples as printed: its custom-model example (``mytrain.py``), run on the CPU, projects onto every
card with a positive lower bound (issue 22)."""

import json
import re
from pathlib import Path

from conftest import run_gpubench

from gpubench.hardware.catalog import load_catalog

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_file(name: str) -> str:
    """The README's fenced Python block whose first line is ``# <name>``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    (block,) = [block for block in blocks if block.startswith(f"# {name}\n")]
    return block


def test_the_readmes_mytrain_projected_from_the_cpu_has_a_positive_lower_bound_on_every_card(tmp_path):
    (tmp_path / "mytrain.py").write_text(readme_file("mytrain.py"))
    args = ["model=custom", "workloads.custom.factory=mytrain:build", "workloads.custom.batch_size=64"]
    args += ["decision.plan.samples.custom=5e7", "hardware=cpu", "tracking.enabled=false", "epochs=4"]
    args += ["warmup_epochs=1", "epoch.min_seconds=0.1", "hardware.burn_in_max_seconds=0", "hardware.cpu_threads=1"]
    completed = run_gpubench(tmp_path, *args, env={"PYTHONPATH": f"{tmp_path}:{README.parent}"})
    assert completed.returncode == 0, completed.stderr[-3000:]
    (path,) = tmp_path.glob("outputs/*/*/report.json")
    report = json.loads(path.read_text())
    # The example builds a fused AdamW: a handful of operations a step, not one per parameter.
    assert report["models"]["custom"]["launches_per_step"] < 30
    rows = report["recommendation"]["projection"]
    assert len(rows) == len(load_catalog())  # one row per catalog card
    for row in rows:
        custom = row["models"]["custom"]
        assert 0 < row["training_hours_lower"] < row["training_hours"] < row["training_hours_upper"], row["card"]
        assert 0 < custom["hours_lower"] < custom["hours"], row["card"]
