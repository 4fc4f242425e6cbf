"""The price snapshot's input contract: a malformed, edited or empty snapshot is one paragraph naming the file, row or
key and what is valid, exit 2, no traceback, both in ``python -m gpubench prices show --dir D`` and in a run given
``decision.prices_dir=D`` (refused before anything is measured, no report written); a negative, zero, infinite or NaN
price is refused by file, line and value; a snapshot dated in the future is shown with a warning. Each malformed
snapshot is the shipped one copied to a temporary folder and broken in one place."""

import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

import pytest
from conftest import run_gpubench

from gpubench.cli.prices import main
from gpubench.decision.config import DecisionConfig
from gpubench.decision.recommendation import build_recommendation
from gpubench.errors import ConfigError
from gpubench.hardware.catalog import load_catalog
from gpubench.prices import SNAPSHOT_DIR, PriceSnapshotError, load_snapshot, read_catalog_csv, sha256_of
from gpubench.results import RunReport

QUICK_CPU = (
    "hardware=cpu",
    "experiment=quick",
    "model=mlp",
    "tracking.enabled=false",
    "data.days=3",
    "hardware.burn_in_max_seconds=0",
)
CPU_REPORT = Path(__file__).parent / "fixtures" / "report_main_bf189fb_cpu_quick_dqn_ppo.json"
#: aws.csv's first row (g5.xlarge, one A10G at 1.006 USD/h), as the shipped file spells its leading columns.
AWS_ROW = "g5.xlarge,us-east-1,1.006,4,16.0,1,A10G,24.0,False,"


def broken_snapshot(
    folder: Path,
    *,
    aws_csv: Callable[[str], str] | None = None,
    manifest: Callable[[dict], object] | None = None,
    resign: bool = True,
    manifest_text: str | None = None,
    remove: str | None = None,
) -> Path:
    """The shipped snapshot copied to ``folder`` with aws.csv's text passed through ``aws_csv`` (its checksum
    re-signed in the manifest when ``resign``, so the row itself is what the loader judges), the manifest's JSON
    through ``manifest`` (or its text replaced by ``manifest_text``) and the file ``remove`` removed."""
    shutil.copytree(SNAPSHOT_DIR, folder)
    data = json.loads((folder / "manifest.json").read_text())
    if aws_csv is not None:
        path = folder / "aws.csv"
        text = path.read_text()
        edited = aws_csv(text)
        assert edited != text, "the edit must change the file"
        path.write_text(edited)
        if resign:
            data["providers"]["aws"]["sha256"] = sha256_of(path)
    (folder / "manifest.json").write_text(
        manifest_text if manifest_text is not None else json.dumps(manifest(data) if manifest is not None else data)
    )
    if remove is not None:
        (folder / remove).unlink()
    return folder


def _set(key: str, value: object) -> Callable[[dict], dict]:
    def edit(data: dict) -> dict:
        data[key] = value
        return data

    return edit


def _aws_entry(value: object) -> Callable[[dict], dict]:
    def edit(data: dict) -> dict:
        data["providers"]["aws"] = value
        return data

    return edit


def _aws_row(old: str, new: str) -> Callable[[str], str]:
    return lambda text: text.replace(AWS_ROW, AWS_ROW.replace(old, new, 1), 1)


def _all_rows_without_gpus(text: str) -> str:
    header, *rows = text.splitlines(keepends=True)
    return header + "".join(row.replace(",1,A10G,", ",0,A10G,").replace(",8,", ",0,") for row in rows)


def _only_aws(data: dict) -> dict:
    data["providers"] = {"aws": data["providers"]["aws"]}
    return data


#: name: (how the shipped snapshot is broken, what the one-paragraph error says).
BAD_SNAPSHOTS: dict[str, tuple[dict, str]] = {
    "manifest-is-a-list": (
        {"manifest": lambda data: [data]},
        "manifest.json holds a JSON list, not a price snapshot manifest: it must be a JSON object with snapshot_date "
        "and providers",
    ),
    "manifest-is-null": (
        {"manifest_text": "null"},
        "manifest.json holds a JSON NoneType, not a price snapshot manifest",
    ),
    "manifest-not-json": ({"manifest_text": "{not json"}, "manifest.json is not valid JSON: "),
    "provider-file-missing": (
        {"remove": "aws.csv"},
        "aws.csv: No such file or directory",
    ),
    "columns-missing": (
        {"aws_csv": lambda text: text.replace("instance_name,location,price,", "instance_name,location,cost,", 1)},
        "aws.csv lacks gpuhunt's catalog columns price",
    ),
    "provider-entry-is-a-string": (
        {"manifest": _aws_entry("aws.csv")},
        "manifest.json: providers.aws is 'aws.csv', not valid: it must be a JSON object with file, sha256",
    ),
    "provider-file-outside-the-folder": (
        {"manifest": _aws_entry({"file": "../aws.csv", "sha256": ""})},
        "manifest.json: providers.aws.file is '../aws.csv', not valid: it must be the name of a CSV file in the "
        "snapshot's folder",
    ),
    "no-providers": (
        {"manifest": _set("providers", {})},
        "manifest.json: providers is {}, not valid: it must be a non-empty JSON object",
    ),
    "snapshot-date-missing": (
        {"manifest": _set("snapshot_date", None)},
        "manifest.json: snapshot_date None is not an ISO date (YYYY-MM-DD)",
    ),
    "gpu-count-not-an-integer": (
        {"aws_csv": _aws_row(",1,A10G,", ",x,A10G,")},
        "aws.csv, line 2: gpu_count 'x' is not valid: it must be a whole number >= 0",
    ),
    "negative-price": (
        {"aws_csv": _aws_row(",1.006,", ",-3,")},
        "aws.csv, line 2: price '-3' is not valid: it must be a finite number > 0 (USD per hour for the whole "
        "instance)",
    ),
    "nan-price": (
        {"aws_csv": _aws_row(",1.006,", ",nan,")},
        "aws.csv, line 2: price 'nan' is not valid: it must be a finite number > 0",
    ),
    "edited-row": (
        {"aws_csv": _aws_row(",1.006,", ",0.5,"), "resign": False},
        "aws.csv's sha256 differs from the one in",
    ),
    "no-gpu-offer": (
        {"aws_csv": _all_rows_without_gpus, "manifest": _only_aws},
        "holds no GPU offer: none of its files (aws.csv) has a row with a gpu_name and a gpu_count of 1 or more",
    ),
}


def make_bad_snapshot(folder: Path, case: str) -> Path:
    return broken_snapshot(folder, **BAD_SNAPSHOTS[case][0])


def one_paragraph(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("case", sorted(BAD_SNAPSHOTS))
def test_prices_show_refuses_a_bad_snapshot_in_one_paragraph_with_exit_2(tmp_path: Path, case: str) -> None:
    folder = make_bad_snapshot(tmp_path / "snapshot", case)
    completed = subprocess.run(
        [sys.executable, "-m", "gpubench", "prices", "show", "--dir", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2, completed.stderr
    assert BAD_SNAPSHOTS[case][1] in one_paragraph(completed.stderr)
    assert completed.stdout == ""


@pytest.mark.parametrize("case", ["manifest-is-a-list", "provider-entry-is-a-string", "edited-row", "no-gpu-offer"])
def test_a_run_given_a_bad_prices_dir_exits_2_before_measuring(tmp_path: Path, case: str) -> None:
    folder = make_bad_snapshot(tmp_path / "snapshot", case)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    completed = run_gpubench(tmp_path, *QUICK_CPU, f"decision.prices_dir={folder}", f"hydra.run.dir={run_dir}")
    elapsed = time.monotonic() - started
    assert completed.returncode == 2, completed.stdout + completed.stderr
    message = one_paragraph(completed.stderr)
    assert message.startswith(f"gpubench: error: `decision.prices_dir` = '{folder}' cannot be priced from: ")
    assert BAD_SNAPSHOTS[case][1] in message
    assert message.endswith("or null for the snapshot shipped with gpubench.")
    # Refused with the config: no epoch measured, no report written.
    assert "epoch" not in completed.stdout
    assert not run_dir.exists() or not list(run_dir.rglob("report.json"))
    assert elapsed < 60, f"refused after {elapsed:.0f} s: the snapshot must be checked before anything is measured"


def test_a_prices_dir_changed_after_the_config_was_checked_is_refused_not_dropped(tmp_path: Path) -> None:
    folder = broken_snapshot(tmp_path / "snapshot")
    decision = DecisionConfig(prices_dir=str(folder))  # a readable snapshot when the config is checked
    with (folder / "aws.csv").open("a") as handle:
        handle.write('g5.2xlarge,us-east-1,0.01,8,32.0,1,A10G,24.0,False,,nvidia,,x86,"{}"\n')
    stored = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))
    with pytest.raises(ConfigError, match=r"^`decision.prices_dir` = .*/aws.csv's sha256 differs"):
        build_recommendation(stored, decision, load_catalog())


@pytest.mark.parametrize(
    ("price", "shown"),
    [("-3", "'-3'"), ("nan", "'nan'"), ("NaN", "'NaN'"), ("inf", "'inf'"), ("0", "'0'"), ("", "''"), ("$1", "'$1'")],
)
def test_a_price_that_is_not_a_positive_finite_number_is_refused_by_file_line_and_value(
    tmp_path: Path, price: str, shown: str
) -> None:
    path = tmp_path / "aws.csv"
    shipped = (SNAPSHOT_DIR / "aws.csv").read_text()
    path.write_text(shipped.replace(AWS_ROW, AWS_ROW.replace(",1.006,", f",{price},")))
    with pytest.raises(PriceSnapshotError) as raised:
        read_catalog_csv(path, "aws")
    assert str(raised.value) == (
        f"{path}, line 2: price {shown} is not valid: it must be a finite number > 0 (USD per hour for the whole "
        "instance)"
    )


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (",1,A10G,", ",-1,A10G,", "gpu_count '-1' is not valid: it must be a whole number >= 0"),
        (",1,A10G,", ",1.5,A10G,", "gpu_count '1.5' is not valid: it must be a whole number >= 0"),
        (",False,", ",yes,", "spot 'yes' is not valid: it must be True or False"),
        (",24.0,False", ",-24,False", "gpu_memory '-24' is not valid: it must be a finite number > 0 (GB per GPU)"),
        (",4,16.0,", ",four,16.0,", "cpu 'four' is not valid: it must be a finite number >= 0"),
    ],
)
def test_a_row_value_out_of_its_column_is_refused_by_file_line_and_value(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    path = tmp_path / "aws.csv"
    shipped = (SNAPSHOT_DIR / "aws.csv").read_text()
    path.write_text(shipped.replace(AWS_ROW, AWS_ROW.replace(old, new, 1), 1))
    with pytest.raises(PriceSnapshotError, match=re.escape(f"{path}, line 2: {message}")):
        read_catalog_csv(path, "aws")


def test_provider_data_that_is_not_a_json_object_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "aws.csv"
    header = (SNAPSHOT_DIR / "aws.csv").read_text().splitlines()[0]
    path.write_text(header + '\ng5.xlarge,us-east-1,1.006,4,16.0,1,A10G,24.0,False,,nvidia,,x86,"[1, 2]"\n')
    with pytest.raises(PriceSnapshotError, match=r"line 2: provider_data '\[1, 2\]' is not valid: it must be a JSON"):
        read_catalog_csv(path, "aws")


def test_rows_without_a_gpu_are_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    # gpuhunt's catalogs list CPU-only instances (gpu_count 0, no gpu_name): they are not GPU offers.
    folder = broken_snapshot(
        tmp_path / "snapshot",
        aws_csv=lambda text: text + 'm5.large,us-east-1,0.096,2,8.0,0,,,False,,,,x86,"{}"\n',
    )
    assert len(load_snapshot(folder).offers) == len(load_snapshot().offers)


def test_a_snapshot_dated_in_the_future_is_shown_with_a_warning_and_its_cost_lines_carry_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shipped = load_snapshot()
    day_before = date.fromordinal(shipped.snapshot_date.toordinal() - 1)
    assert main(["show"], today=lambda: day_before) == 0
    out = capsys.readouterr().out
    warning = (
        f"warning: price snapshot of {shipped.snapshot_date.isoformat()} is dated 1 day in the future (today is "
        f"{day_before.isoformat()}, UTC): its manifest's snapshot_date or this machine's clock is wrong"
    )
    assert f"price snapshot of {shipped.snapshot_date.isoformat()} (dated 1 day in the future)" in out
    assert warning in out and "-1 day" not in out

    folder = broken_snapshot(tmp_path / "snapshot", manifest=_set("snapshot_date", "2030-12-31"))
    assert main(["show", "--dir", str(folder)], today=lambda: date(2026, 12, 6)) == 0
    out = capsys.readouterr().out
    assert "price snapshot of 2030-12-31 (dated 1486 days in the future)" in out and "-1486" not in out
    assert "warning: price snapshot of 2030-12-31 is dated 1486 days in the future" in out

    stored = RunReport.from_dict(json.loads(CPU_REPORT.read_text()))
    rec = build_recommendation(stored, DecisionConfig(prices_dir=str(folder)), load_catalog(), today=date(2026, 12, 6))
    assert rec.cost_table and all("is dated 1486 days in the future" in (row.note or "") for row in rec.cost_table)
    assert rec.price_snapshot is not None and "in the future" in (rec.price_snapshot.stale or "")
