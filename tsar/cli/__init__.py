"""The ``tsar`` command line: :func:`main`, the argument helpers and one module per
sub-command in :mod:`tsar.cli.commands` (commands never import each other)."""

from tsar.cli.main import main

__all__ = ["main"]
