"""The README as printed: at most 200 lines whose first screen answers, with the two commands and a verdict quoted
from a stored report as the tool prints it (issue 25); links that lead somewhere; its custom-model example
(``mytrain.py``), run on the CPU, projecting onto every card with a positive lower bound (issue 22). Its shell
commands are run in tests/test_readme_commands.py."""

import json
import re
from pathlib import Path

from conftest import run_gpubench

from gpubench.hardware.catalog import load_catalog
from gpubench.output.console import largest_tried_batches, rent_lines
from gpubench.results import RunReport

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: The README's first screen: what a reader sees before scrolling.
FIRST_SCREEN_LINES = 40


def readme_blocks(language: str, path: Path = README) -> list[str]:
    """The fenced code blocks in ``language`` of a Markdown file (the README by default), in order."""
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.DOTALL)


def readme_file(name: str, path: Path = README) -> str:
    """The fenced Python block whose first line is ``# <name>`` (of the README by default)."""
    (block,) = [block for block in readme_blocks("python", path) if block.startswith(f"# {name}\n")]
    return block


def stored_report(text: str) -> tuple[Path, RunReport]:
    """The one report under benchmarks/results/ that ``text`` links, and the report it holds."""
    (link,) = set(re.findall(r"\]\((benchmarks/results/[^)]+[-/]report\.json)\)", text))
    return ROOT / link, RunReport.from_dict(json.loads((ROOT / link).read_text()))


def test_the_readme_is_at_most_200_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_first_screen_gives_the_two_commands_and_a_verdict_quoted_from_a_stored_report():
    first_screen = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN_LINES])
    commands, verdict = readme_blocks("bash")[0], readme_blocks("text")[0]
    assert commands in first_screen and verdict in first_screen
    lines = [line.split("#")[0].strip() for line in commands.splitlines()]
    # CI runs the README's test command (.ci/run); the first installs and runs the main job.
    assert lines == [
        'pip install -e ".[dev]" && python -m gpubench experiment=quick',
        "python -m pytest -q -n 2 --dist loadfile",
    ]
    assert "python3 -m pytest -q -n 2 --dist loadfile\n" in (ROOT / ".ci" / "run").read_text()
    path, report = stored_report(first_screen)
    assert "H200" in report.hardware.device_name and "H200" in first_screen and path.name in first_screen
    # The quoted line is what the console prints for that report, cut at the ellipsis.
    quoted = " ".join(verdict.split()).removesuffix("…").strip()
    printed = f"Recommendation: {report.recommendation.decision} — {report.recommendation.reasoning}"
    assert printed.startswith(quoted) and re.search(r"\d+\.\d h", quoted), quoted


def test_the_renting_section_quotes_the_stored_reports_cheapest_rentals_as_printed():
    readme = README.read_text(encoding="utf-8")
    rentals = [block for block in readme_blocks("text") if block.startswith("Cheapest rentals")]
    report = stored_report(readme)[1]
    assert rentals == ["\n".join(rent_lines(report.recommendation, largest_tried_batches(report))) + "\n"]
    renting = readme[readme.index("## Renting a GPU") :]
    for command in ("python -m gpubench.prices show", "python -m gpubench.launch", "--target skypilot"):
        assert command in renting


def test_the_docs_carry_the_readmes_mytrain_unchanged():
    assert readme_file("mytrain.py", DOCS / "custom-models.md") == readme_file("mytrain.py")


def test_every_relative_link_of_the_readme_and_the_docs_leads_to_a_file():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#")[0]).resolve()
            assert path.exists(), f"{page.name} links {target}, which does not exist"


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
