"""`brainctl`: the command line (entry point `brain.cli:main`)."""

from brain.cli.main import main

__all__ = ["main"]
