"""The report's ``recommendation.method`` texts: one paragraph per file here, wrapped, with ``{NAME}`` fields."""

from importlib import resources


def method_text(name: str, **values: object) -> str:
    """The text of ``<name>.txt`` on one line, its fields filled from ``values``."""
    text = resources.files(__name__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return " ".join(text.split()).format(**values)
