"""The package's layering, checked on its import graph (every ``import`` statement, module-level or local, and
``importlib.import_module`` of a literal name).

The rules are DESIGN.md's: models import only the workload contract, data and config; stats imports no torch;
decision reads typed results and never the device; output writes and never measures; only the tracking modules
import mlflow, inside functions; only ``hardware/`` talks to NVML and asks torch about the device; nothing imports
the coordinator; the module-level imports have no cycle; and no module is over :data:`MAX_MODULE_LINES` lines (one
responsibility per module). A failure names the module and the import (or the size) that breaks the rule.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpubench"
#: The most lines a module may have: past it, it holds more than one thing and is split along a seam.
MAX_MODULE_LINES = 700

#: torch.cuda calls that query or configure the device itself (allocator statistics and synchronisation are not).
DEVICE_QUERIES = frozenset(
    {
        "is_available",
        "device_count",
        "get_device_properties",
        "get_device_name",
        "get_device_capability",
        "mem_get_info",
        "set_per_process_memory_fraction",
    }
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(tree: ast.Module, module: str, *, top_level_only: bool = False) -> set[str]:
    """Absolute names of the modules ``tree`` imports (``from a import b`` counts as ``a`` and ``a.b``)."""
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level] if not module.endswith("__init__") else module.split(".")
                base = ".".join([*package, base]) if base else ".".join(package)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value)  # importlib.import_module("pynvml")
    return names


def device_queries(tree: ast.Module) -> set[str]:
    """``torch.cuda.<query>`` attribute uses in ``tree`` that are device queries."""
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in DEVICE_QUERIES
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "cuda"
        ):
            found.add(node.attr)
    return found


MODULES = {module_name(path): ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def gpubench_imports(module: str) -> set[str]:
    return {name for name in imports_of(MODULES[module], module) if name.split(".")[0] == "gpubench"}


def third_party_imports(module: str) -> set[str]:
    return {name.split(".")[0] for name in imports_of(MODULES[module], module)}


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def known(name: str) -> bool:
    """``name`` is a gpubench module (not a name imported from one)."""
    return name in MODULES


def test_the_graph_sees_every_module() -> None:
    for expected in (
        "gpubench.results",
        "gpubench.bench.runner",
        "gpubench.output.tracking",
        "gpubench.models.tft.workload",
    ):
        assert expected in MODULES


@pytest.mark.parametrize("module", [m for m in MODULES if in_package(m, "gpubench.models")])
def test_models_import_only_the_workload_contract_data_and_config(module: str) -> None:
    allowed = (
        "gpubench.models",
        "gpubench.workload",
        "gpubench.data",
        "gpubench.errors",
        "gpubench.results.units",
    )
    bad = {name for name in gpubench_imports(module) if known(name) and not any(in_package(name, a) for a in allowed)}
    assert not bad, f"{module} imports {sorted(bad)}: a model may import only {', '.join(allowed)}"


@pytest.mark.parametrize("module", [m for m in MODULES if in_package(m, "gpubench.stats")])
def test_stats_is_pure_numpy_and_scipy(module: str) -> None:
    assert "torch" not in third_party_imports(module), f"{module} imports torch"
    allowed = ("gpubench.stats", "gpubench.results", "gpubench.results.units", "gpubench.errors")
    bad = {name for name in gpubench_imports(module) if known(name) and not any(in_package(name, a) for a in allowed)}
    assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize("module", [m for m in MODULES if in_package(m, "gpubench.decision")])
def test_decision_reads_typed_results_and_never_the_device(module: str) -> None:
    assert "torch" not in third_party_imports(module), f"{module} imports torch"
    forbidden = ("gpubench.measure", "gpubench.bench.runner", "gpubench.bench.model_run", "gpubench.output")
    bad = {name for name in gpubench_imports(module) if any(in_package(name, f) for f in forbidden)}
    # The model registry (``gpubench.models`` itself) states each model's plan and budget; no model's code.
    bad |= {name for name in gpubench_imports(module) if in_package(name, "gpubench.models") and known(name)} - {
        "gpubench.models"
    }
    hardware = {
        name
        for name in gpubench_imports(module)
        if in_package(name, "gpubench.hardware") and known(name) and name not in ("gpubench.hardware.catalog",)
    }
    what_it_may = "of hardware/ it may read the card catalog, of models/ the registry"
    assert not bad | hardware, f"{module} imports {sorted(bad | hardware)} ({what_it_may})"


@pytest.mark.parametrize("module", [m for m in MODULES if in_package(m, "gpubench.output")])
def test_output_writes_and_never_measures(module: str) -> None:
    forbidden = ("gpubench.measure", "gpubench.hardware", "gpubench.bench", "gpubench.models", "gpubench.decision")
    bad = {name for name in gpubench_imports(module) if any(in_package(name, f) for f in forbidden)}
    assert not bad, f"{module} imports {sorted(bad)}"


#: The tracking modules that talk to MLflow: the store, the live run (with its system metrics) and reading runs back.
#: The run record (what is logged) and the tracking facade import no mlflow.
MLFLOW_IMPORTERS = {
    "gpubench.output.tracking_store",
    "gpubench.output.tracking_live",
    "gpubench.output.tracking_system",
    "gpubench.output.tracking_read",
}


def test_only_the_tracking_modules_import_mlflow() -> None:
    importers = {m for m in MODULES if "mlflow" in third_party_imports(m)}
    assert importers == MLFLOW_IMPORTERS


def test_mlflow_is_imported_only_inside_functions() -> None:
    # `import gpubench.output.tracking` (the runner, the sweep callback, compare) must not pull in mlflow.
    importers = {
        m for m in MODULES if "mlflow" in {n.split(".")[0] for n in imports_of(MODULES[m], m, top_level_only=True)}
    }
    assert not importers, sorted(importers)


def test_only_hardware_talks_to_nvml_and_asks_torch_about_the_device() -> None:
    nvml = {m for m in MODULES if "pynvml" in third_party_imports(m)}
    assert nvml and all(in_package(m, "gpubench.hardware") for m in nvml), sorted(nvml)
    queries = {m: device_queries(tree) for m, tree in MODULES.items() if not in_package(m, "gpubench.hardware")}
    assert not {m: q for m, q in queries.items() if q}


def test_only_the_measured_run_and_the_commands_import_it() -> None:
    # The run's modules (runner, session, model run, rounds, what-ifs, ranks, replay) import one another; from
    # outside bench/ only the commands' porch, the package's lazy API entry and the root schema (the ranks' config
    # group) may reach them.
    for module in MODULES:
        if in_package(module, "gpubench.bench") or in_package(module, "gpubench.cli"):
            continue
        reached = {name for name in gpubench_imports(module) if in_package(name, "gpubench.bench") and known(name)}
        allowed = {"gpubench": {"gpubench.bench.api"}, "gpubench.config": {"gpubench.bench.ranks_config"}}.get(
            module, set()
        )
        assert reached <= allowed, f"{module} imports {sorted(reached - allowed)}: only bench/ and cli/ may"


def test_the_layout_has_one_wing_for_the_run_and_one_porch_for_the_commands() -> None:
    top_level = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top_level) <= 10, top_level
    for module in ("runner", "session", "model_run", "model_rounds", "round_schedule", "what_if", "ranks", "replay"):
        assert f"gpubench.bench.{module}" in MODULES
    for command in ("run", "validate", "compare", "launch", "prices", "rent"):
        assert f"gpubench.cli.{command}" in MODULES


def test_the_scaling_arithmetic_is_pure() -> None:
    # The efficiency and the global epochs are statistics over typed results, testable without a process group.
    assert "torch" not in third_party_imports("gpubench.stats.scaling")
    assert "torch" not in third_party_imports("gpubench.bench.ranks_config")


@pytest.mark.parametrize(
    "module",
    [m for m in MODULES if in_package(m, "gpubench.results")]
    + ["gpubench.results.units", "gpubench.errors", "gpubench.output.redact"],
)
def test_results_and_units_are_the_bottom_layer(module: str) -> None:
    # The redaction helper is used by the entry point's context, the report file, tracking, the console and the
    # sweep: it must stay importable from all of them, so it imports nothing of gpubench. The results package's
    # section modules import one another (a report holds its sections) and nothing else of gpubench but units.
    assert "torch" not in third_party_imports(module)
    allowed = {"gpubench", "gpubench.__version__", "gpubench.results.units"} | {
        f"gpubench.results.units.{name}" for name in ("HOURS_PER_DAY", "MS_PER_S")
    }
    bad = {
        name for name in gpubench_imports(module) if name not in allowed and not in_package(name, "gpubench.results")
    }
    assert not bad, f"{module} imports {sorted(bad)}"


def test_module_level_imports_have_no_cycle() -> None:
    graph = {
        module: {
            name
            for name in imports_of(tree, module, top_level_only=True)
            if known(name) and name != module and not module.startswith(name + ".")
        }
        for module, tree in MODULES.items()
    }
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle = [*path[path.index(target) :], target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_no_module_is_over_the_line_limit() -> None:
    lines = {path.relative_to(PACKAGE.parent): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    long = {str(path): count for path, count in sorted(lines.items()) if count > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines, to split along a seam: {long}"
