"""An area-only Liberty of sky130_fd_sc_hd standard cells, for relative area figures.

Cell footprints are the ``SIZE`` statements of the cells' LEF views in the SkyWater SKY130 PDK
(``sky130_fd_sc_hd``, Apache-2.0; e.g. ``sky130_fd_sc_hd__nand2_1.lef``: ``SIZE 1.38 BY 2.72``).
All ``hd`` cells are one 2.72 um row high, so a cell is listed by its width. There is no timing or
power data here: ABC maps for area, and the figures are comparable only between designs mapped
the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

ROW_HEIGHT_UM = 2.72
"""Height of every sky130_fd_sc_hd cell (LEF ``SIZE w BY 2.72``)."""


@dataclass(frozen=True)
class Cell:
    name: str
    width_um: float
    inputs: tuple[str, ...]
    output: str
    function: str

    @property
    def area(self) -> float:
        return round(self.width_um * ROW_HEIGHT_UM, 4)


CELLS = (
    Cell("inv_1", 1.38, ("A",), "Y", "!A"),
    Cell("buf_1", 1.38, ("A",), "X", "A"),
    Cell("nand2_1", 1.38, ("A", "B"), "Y", "!(A&B)"),
    Cell("nor2_1", 1.38, ("A", "B"), "Y", "!(A|B)"),
    Cell("and2_1", 2.30, ("A", "B"), "X", "A&B"),
    Cell("or2_1", 2.30, ("A", "B"), "X", "A|B"),
    Cell("nand3_1", 1.84, ("A", "B", "C"), "Y", "!(A&B&C)"),
    Cell("nor3_1", 1.84, ("A", "B", "C"), "Y", "!(A|B|C)"),
    Cell("xor2_1", 3.22, ("A", "B"), "X", "A^B"),
    Cell("xnor2_1", 3.22, ("A", "B"), "Y", "!(A^B)"),
    Cell("mux2_1", 4.14, ("A0", "A1", "S"), "X", "(A0&!S)|(A1&S)"),
    Cell("mux2i_1", 3.68, ("A0", "A1", "S"), "Y", "!((A0&!S)|(A1&S))"),
    Cell("a21oi_1", 1.84, ("A1", "A2", "B1"), "Y", "!((A1&A2)|B1)"),
    Cell("o21ai_1", 1.84, ("A1", "A2", "B1"), "Y", "!((A1|A2)&B1)"),
    Cell("a22oi_1", 2.76, ("A1", "A2", "B1", "B2"), "Y", "!((A1&A2)|(B1&B2))"),
    Cell("o22ai_1", 2.30, ("A1", "A2", "B1", "B2"), "Y", "!((A1|A2)&(B1|B2))"),
    Cell("a21o_1", 2.76, ("A1", "A2", "B1"), "X", "(A1&A2)|B1"),
    Cell("o21a_1", 2.76, ("A1", "A2", "B1"), "X", "(A1|A2)&B1"),
    Cell("maj3_1", 3.68, ("A", "B", "C"), "X", "(A&B)|(A&C)|(B&C)"),
)
"""Combinational cells offered to ABC (drive strength 1)."""

FLOP = Cell("dfxtp_1", 7.36, ("D",), "Q", "IQ")
"""Positive-edge D flip-flop; ``dfflegalize`` reduces every flop to ``$_DFF_P_`` first."""

PREFIX = "sky130_fd_sc_hd__"

NAND2_AREA = CELLS[2].area
"""Area of ``nand2_1`` (3.75 um^2): the unit of NAND2-equivalents."""


def liberty() -> str:
    """The Liberty text (``library(sky130_fd_sc_hd_area)``)."""
    out = ["library(sky130_fd_sc_hd_area) {",
           '  delay_model : table_lookup;', "",
           '  time_unit : "1ns";', '  voltage_unit : "1V";', '  current_unit : "1mA";',
           '  capacitive_load_unit (1, pf);', '  leakage_power_unit : "1nW";']
    for cell in CELLS:
        out.append(f"  cell({PREFIX}{cell.name}) {{")
        out.append(f"    area : {cell.area};")
        out += [f"    pin({pin}) {{ direction : input; }}" for pin in cell.inputs]
        out.append(f'    pin({cell.output}) {{ direction : output; function : "{cell.function}"; }}')
        out.append("  }")
    out += [f"  cell({PREFIX}{FLOP.name}) {{", f"    area : {FLOP.area};",
            '    ff(IQ, IQN) { clocked_on : "CLK"; next_state : "D"; }',
            "    pin(CLK) { direction : input; clock : true; }",
            "    pin(D) { direction : input; }",
            '    pin(Q) { direction : output; function : "IQ"; }', "  }", "}"]
    return "\n".join(line for line in out if line) + "\n"
