"""``gpubench.benchmark``: time your own training from Python (a notebook, a script), as ``model=custom`` does.

The run is the command line's: the config is composed by Hydra from the same YAML (``gpubench/conf/``) with the
same overrides, typed and checked, and run by the same runner, which writes the same report folder
(``outputs/<date>/<time>/report.json`` and the resolved config). The report comes back as the typed
:class:`~gpubench.results.RunReport`.

How the callable reaches the workload: the workload finds its build function by name
(``workloads.custom.factory``). A function importable by its own name (``from mytrain import build``) is passed as
that name, ``mytrain:build``, so the report's config reruns from the command line and ``python -m
gpubench.validate`` can rebuild it in a fresh process. Any other callable (a closure, a lambda, a function defined
in the notebook or in ``__main__``) is registered in :mod:`gpubench.models.custom.registry` under a generated name
for the length of the run; such a report names the registry entry, and ``workload.build`` names the callable
(``module.qualname``), but it cannot be replayed in another process.

MLflow tracking is off unless asked (``tracking=True``): the report is the return value, and a notebook that
benchmarks a dozen variants should not grow an ``mlruns/`` store (and import mlflow, seconds) without being asked.
"""

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from gpubench.cli.errors import hydra_error_message, quote_value
from gpubench.conf import CONF_DIR
from gpubench.errors import ConfigError
from gpubench.models.custom import registry
from gpubench.results import RunReport

#: Keys :func:`benchmark` sets from its own arguments; an option or override naming one is refused.
_OWN_KEYS = ("model", "workloads.custom.factory")
#: A string value Hydra's override grammar takes unquoted (anything else is quoted).
_PLAIN_VALUE = re.compile(r"^[\w.\-/:~+@]+$")


def override_value(value: Any) -> str:
    """``value`` written in Hydra's override grammar: true/false, null, numbers, [lists], quoted strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(override_value(item) for item in value) + "]"
    text = str(value)
    return text if _PLAIN_VALUE.match(text) else quote_value(text)


def _option_overrides(options: Mapping[str, Any]) -> list[str]:
    """Keyword options as override strings: ``__`` in a name stands for the dot of a dotted key
    (``statistics__confidence_level=0.99`` is ``statistics.confidence_level=0.99``)."""
    return [f"{name.replace('__', '.')}={override_value(value)}" for name, value in options.items()]


def factory_name(build: Callable[..., Any]) -> str | None:
    """``module:qualname`` of ``build`` when importing that name gives back ``build`` itself (a function defined at
    the top level of an importable module, not in ``__main__``), else None."""
    module_name, qualname = getattr(build, "__module__", None), getattr(build, "__qualname__", None)
    if not module_name or not qualname or module_name == "__main__" or "<" in qualname:
        return None
    try:
        target: Any = importlib.import_module(module_name)
        for attribute in qualname.split("."):
            target = getattr(target, attribute)
    except (ImportError, AttributeError):
        return None
    return f"{module_name}:{qualname}" if target is build else None


def _key_of(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def benchmark(
    build: Callable[..., Any],
    *,
    batch_size: int,
    plan_samples: float | None = None,
    samples_per_step: float | None = None,
    sample_unit: str = "sample",
    tracking: bool = False,
    overrides: Sequence[str] | str = (),
    **options: Any,
) -> RunReport:
    """Benchmark your training step and return the report.

    ``build(batch_size, device)`` returns a callable that runs one optimizer update and returns its loss tensor (or
    None, or ``(loss, grad_norm)``); it is timed at ``batch_size`` (``workloads.custom.batch_size``).
    ``plan_samples`` is the full training in samples (``decision.plan.samples.custom``; without it the report has
    no time estimate), ``samples_per_step`` what one step consumes at ``batch_size`` (default: ``batch_size``),
    ``sample_unit`` what a sample is. ``tracking`` logs an MLflow run as the command line does. Any other config
    key is a keyword option, ``__`` standing for a dot (``hardware="cpu", experiment="quick", epochs=20,
    statistics__confidence_level=0.99``); ``overrides`` takes Hydra override strings as typed on the command line,
    applied last.

    Raises :class:`~gpubench.errors.ConfigError` for a bad value (naming the key), as the command line exits 2. A
    model that fails while measured is a result: its section says ``status: failed`` and why.
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from gpubench.bench.job import RunContext
    from gpubench.bench.runner import run
    from gpubench.config import register_configs, typed_config
    from gpubench.output.report_file import read_report

    if not callable(build):
        raise ConfigError(
            f"`build` = {build!r} is not callable: gpubench.benchmark's first argument must be your build function, "
            "`build(batch_size, device)` returning a callable that runs one optimizer update (the function itself, "
            "not its name or its result)."
        )
    # One override given as a plain string is one override, not a sequence of one-character ones.
    user_overrides = [*_option_overrides(options), *([overrides] if isinstance(overrides, str) else overrides)]
    refused = sorted({_key_of(o) for o in user_overrides} & set(_OWN_KEYS))
    if refused:
        raise ConfigError(
            f"`{refused[0]}` is set by gpubench.benchmark itself (model=custom, the build function you pass); "
            "leave it out of the options and overrides."
        )
    factory = factory_name(build) or registry.register(build)
    try:
        own = [
            "model=custom",
            f"workloads.custom.factory={factory}",
            f"workloads.custom.batch_size={override_value(batch_size)}",
            f"workloads.custom.sample_unit={override_value(sample_unit)}",
            f"tracking.enabled={override_value(tracking)}",
        ]
        if samples_per_step is not None:
            own.append(f"workloads.custom.samples_per_step={override_value(samples_per_step)}")
        if plan_samples is not None:
            own.append(f"decision.plan.samples.custom={override_value(plan_samples)}")
        all_overrides = [*own, *user_overrides]
        register_configs()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="gpubench"):
            try:
                cfg = compose(config_name="config", overrides=all_overrides, return_hydra_config=True)
            # An unknown key or option, a value of the wrong type, an override Hydra cannot parse: worded as the
            # command line words it.
            except (HydraException, OmegaConfBaseException) as exc:
                raise ConfigError(hydra_error_message(exc)) from None
        run_dir = Path(str(cfg.hydra.run.dir)).absolute()
        choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra")}
        with open_dict(cfg):
            del cfg["hydra"]
        # The default report path names Hydra's run folder, which only a Hydra app has: use the folder the app
        # would have had (still overridable by GPU_BENCHMARK_OUTPUT, as on the command line).
        if str(OmegaConf.to_container(cfg, resolve=False)["output"]).startswith("${oc.env:GPU_BENCHMARK_OUTPUT,"):
            cfg.output = "${oc.env:GPU_BENCHMARK_OUTPUT," + str(run_dir / "report.json") + "}"
        typed = typed_config(cfg)
        context = RunContext(run_dir=run_dir, overrides=tuple(all_overrides), choices=choices)
        run(typed, context)
        return read_report(Path(typed.output))
    finally:
        registry.unregister(factory)
