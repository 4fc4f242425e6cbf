"""Errors a user can act on.

Every error raised for bad input is a :class:`GpubenchError`: the entry point prints its message as one paragraph
and exits non-zero, without a traceback. Messages name the offending key, file or value and say what is valid.
"""


class GpubenchError(Exception):
    """Base class for errors caused by the user's input or environment (not by a bug in gpubench)."""


class ConfigError(GpubenchError):
    """A configuration value is out of range or not one of the valid options."""


class DataError(GpubenchError):
    """A market-data file or folder is missing, empty, corrupted, truncated or of an unsupported schema."""


class OutputError(GpubenchError):
    """A report or artifact cannot be written where the configuration says."""
