"""The Hydra config tree (YAML groups), shipped inside the package so a wheel and the ``gpubench`` command carry it."""

from pathlib import Path

#: This folder: the primary config ``config.yaml`` and one folder per config group.
CONF_DIR = Path(__file__).resolve().parent
