"""The T-SAR instruction-set extension: definitions, golden semantics, encoding and assembly.

Everything here derives from the configurations in :mod:`tsar.isa.config` and the instruction
table built from them in :mod:`tsar.isa.instructions`.
"""

from tsar.isa.assembler import AssemblyError, Program, assemble, assemble_file
from tsar.isa.codec import EncodingError, InvalidInstruction, TsarInstruction, decode, encode, is_tsar, make
from tsar.isa.config import (
    C2S4,
    C2S4_128,
    C2S4_512,
    C4S4,
    C4S4_512,
    TsarConfig,
    configs,
    get_config,
    register_config,
)
from tsar.isa.disassembler import DecodedLine, disassemble, format_lines
from tsar.isa.instructions import Field, InstructionSpec, Kind, OperandSpec, by_mnemonic, instructions
from tsar.isa.operands import Memory, Register
from tsar.isa.semantics import pack_tile, tgemv, tlut, unpack_tile, weight_codes
from tsar.isa.stream import Decoded, decode_one, decode_stream

__all__ = [
    "C2S4", "C2S4_128", "C2S4_512", "C4S4", "C4S4_512", "AssemblyError", "Decoded", "DecodedLine",
    "EncodingError", "Field",
    "InstructionSpec", "InvalidInstruction", "Kind", "Memory", "OperandSpec", "Program", "Register",
    "TsarConfig", "TsarInstruction", "assemble", "assemble_file", "by_mnemonic", "configs",
    "decode", "decode_one", "decode_stream", "disassemble", "encode", "format_lines", "get_config",
    "instructions", "is_tsar", "make", "pack_tile", "register_config", "tgemv", "tlut",
    "unpack_tile", "weight_codes",
]
