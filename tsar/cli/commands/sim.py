"""``tsar sim coverage``: which instruction forms the simulator executes, per ISA extension.

The forms are iced-x86's VEX forms of AVX, AVX2, FMA, F16C, BMI1 and BMI2, and its EVEX forms of the
AVX-512 extensions Zen 4 and Zen 5 ship, with the VEX forms that came with them (opmask
instructions, AVX-VNNI, GFNI, VAES, VPCLMULQDQ) (``tsar.sim.x86.forms``); a form counts as supported
when every encoding of it (masked, broadcast and rounding variants included) compiles in the
execution layer. Correctness is the differential test suite's job
(``tests/sim/test_forms_differential.py``: every form bit for bit against the host CPU).
"""

from __future__ import annotations

import argparse

NAME = "sim"
HELP = "simulator facts: instruction-form coverage per extension"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sim_command", metavar="WHAT", required=True)
    cov = sub.add_parser("coverage", help="supported/total VEX and EVEX forms per extension (from iced-x86)",
                         description="supported/total VEX and EVEX (AVX-512) forms per extension, "
                                     "derived from iced-x86's instruction tables; names what is missing")
    cov.add_argument("--json", action="store_true", help="print the report as JSON")
    cov.add_argument("--list", action="store_true", help="also list every form, supported or not")


def run(args: argparse.Namespace) -> int:
    from tsar.sim.coverage import coverage
    from tsar.sim.x86.forms import all_forms

    report = coverage()
    if args.json:
        from tsar.jsonout import emit

        emit("sim-coverage", source="iced-x86 VEX forms of AVX, AVX2, FMA, F16C, BMI1, BMI2; EVEX "
                                    "forms of the AVX-512 extensions, GFNI, VAES, VPCLMULQDQ; "
                                    "opmask and AVX-VNNI VEX forms",
             extensions=[{"extension": c.extension, "supported": c.supported, "total": c.total,
                          "missing": c.missing} for c in report])
        return 0 if all(not c.missing for c in report) else 1
    width = max(len(c.extension) for c in report)
    print(f"{'extension':<{width}} {'supported':>9} {'total':>6} {'coverage':>9}")
    for c in report:
        print(f"{c.extension:<{width}} {c.supported:>9} {c.total:>6} {c.percent:>8.1f}%")
    supported = sum(c.supported for c in report)
    total = sum(c.total for c in report)
    print(f"{'all':<{width}} {supported:>9} {total:>6} {100.0 * supported / total:>8.1f}%")
    for c in report:
        for name in c.missing:
            print(f"missing ({c.extension}): {name}")
    if args.list:
        missing = {n for c in report for n in c.missing}
        for form in all_forms():
            mark = "missing" if form.name in missing else "ok"
            print(f"{form.extension:<{width}} {mark:<8} {form.name}")
    return 0 if supported == total else 1
