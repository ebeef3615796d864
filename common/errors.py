"""The project's base exception: bad input, reported by the CLI as one line without a traceback.

It lives in the lowest layer so that every layer (isa, sim, rtl, kernels, front end) can raise it.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem with what the user asked for (bad file, bad option, bad shape, guest fault)."""
