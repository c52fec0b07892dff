"""The version of loopscope, in one place (pyproject.toml repeats it)."""

__version__ = "0.1.0"
