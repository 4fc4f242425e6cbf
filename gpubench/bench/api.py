"""``gpubench.benchmark``: time your own training from Python, as ``model=custom`` does, through the command line's
config composition and runner. An importable build function is passed by name (``mytrain:build``) so that the
report can be replayed; any other callable is registered in :mod:`gpubench.models.custom.registry` for the run.
MLflow tracking is off unless asked, so that a notebook does not grow an ``mlruns/`` store."""

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
    """Keyword options as override strings, ``__`` in a name standing for a dot."""
    return [f"{name.replace('__', '.')}={override_value(value)}" for name, value in options.items()]


def factory_name(build: Callable[..., Any]) -> str | None:
    """``module:qualname`` of ``build`` when importing that name gives back ``build`` itself, else None."""
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

    ``build(batch_size, device)`` returns a callable running one optimizer update (returning its loss, None or
    ``(loss, grad_norm)``). ``plan_samples`` is the full training in samples; other config keys are keyword options
    (``statistics__confidence_level=0.99``), ``overrides`` Hydra override strings applied last. Raises
    :class:`~gpubench.errors.ConfigError` for a bad value."""
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
            except (HydraException, OmegaConfBaseException) as exc:
                raise ConfigError(hydra_error_message(exc)) from None
        run_dir = Path(str(cfg.hydra.run.dir)).absolute()
        choices = {k: str(v) for k, v in cfg.hydra.runtime.choices.items() if not k.startswith("hydra")}
        with open_dict(cfg):
            del cfg["hydra"]
        # The default report path names Hydra's run folder, which only a Hydra app has.
        if str(OmegaConf.to_container(cfg, resolve=False)["output"]).startswith("${oc.env:GPU_BENCHMARK_OUTPUT,"):
            cfg.output = "${oc.env:GPU_BENCHMARK_OUTPUT," + str(run_dir / "report.json") + "}"
        typed = typed_config(cfg)
        context = RunContext(run_dir=run_dir, overrides=tuple(all_overrides), choices=choices)
        run(typed, context)
        return read_report(Path(typed.output))
    finally:
        registry.unregister(factory)
