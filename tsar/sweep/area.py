"""Area of each sweep variant from the RTL: its slice synthesized with and without the T-SAR
additions (:func:`tsar.rtl.synth.synthesize`, cached by the RTL), as NAND2-equivalents of the
additions and their share of the base slice. A variant the RTL cannot build (an axis it does not
implement, or the RTL unavailable) gets no area: its columns stay empty, never estimated."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tsar.isa.config import get_config


def area_columns(variants: Sequence[str], *, progress: Callable[[str], None] | None = None
                 ) -> dict[str, dict[str, float]]:
    """``{variant: {"area_nand2": ..., "area_overhead_pct": ...}}`` for the variants the RTL builds;
    the others are absent (reported through ``progress`` with the RTL's reason)."""
    say = progress or (lambda _m: None)
    out: dict[str, dict[str, float]] = {}
    try:
        from tsar.rtl.synth import nand2, synthesize
    except Exception as exc:
        say(f"area: RTL unavailable ({type(exc).__name__}: {exc}); area columns left empty")
        return out
    for name in variants:
        cfg = get_config(name)
        try:
            base, tsar = synthesize([(cfg.vector_bits, ()), (cfg.vector_bits, (cfg,))])
        except Exception as exc:
            say(f"area: {name}: not built by the RTL ({exc}); left empty")
            continue
        added = tsar.total().area_um2 - base.total().area_um2
        out[name] = {"area_nand2": round(nand2(added), 1),
                     "area_overhead_pct": round(100.0 * added / base.total().area_um2, 3)}
    return out
