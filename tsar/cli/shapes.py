"""Layer shapes given on the command line: ``NxMxK`` (tokens, outputs, inputs)."""

from __future__ import annotations

from tsar.errors import UserError
from tsar.models import BITNET_2B_LAYERS

DEFAULT_SHAPE = "1x{}x{}".format(*BITNET_2B_LAYERS[0])
"""The default layer of the commands that take ``--shape``: one token through BitNet-2B's square
(attention) projection, ``1x2560x2560``."""


def parse_shape(text: str, option: str = "--shape") -> tuple[int, int, int]:
    """``"NxMxK"`` -> ``(N, M, K)``; a UserError naming ``option`` for anything else."""
    try:
        n, m, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise UserError(f"{option}: expected N x M x K such as {DEFAULT_SHAPE}, got {text!r}") from None
    if min(n, m, k) <= 0:
        raise UserError(f"{option}: sizes must be positive, got {text!r}")
    return n, m, k
