"""Reader of BitNet-style ternary checkpoints stored in GGUF (bitnet.cpp, llama.cpp).

:func:`load` memory-maps a ``.gguf`` file, reads the hyper-parameters from its metadata and returns
every BitLinear matrix as ternary int8 ``w_t`` (M outputs x K inputs) with one per-tensor float
scale (``W ~= w_t * scale``), the embeddings, LM head and norms as float32.

GGUF facts used here (ggml-org/ggml ``docs/gguf.md`` and ``ggml/include/ggml.h``; PyPI ``gguf``
0.19.0 ``constants.py``): a little-endian header ``"GGUF"``, u32 version (2 or 3), u64 tensor count,
u64 key/value count, the key/value pairs, then per tensor its name, u32 dimension count, u64 ``ne``
(row length ``ne0`` first: a matrix of M rows of K is ``ne = [K, M]``), u32 type id and u64 data
offset relative to the data section, which starts at the next multiple of ``general.alignment``
(32 by default). Type ids 36 (I2_S), 37 (I8_S), 38 (TL1) and 39 (TL2) are bitnet.cpp's
(microsoft/BitNet's llama.cpp fork, ``ggml/include/ggml.h``); upstream ggml later gave 39 to MXFP4.
An I2_S tensor of n weights takes ``n/4 + 32`` bytes: the codes (layout in
:mod:`tsar.kernels.formats.i2s`) and a 32-byte tail whose first 4 bytes are the float32 scale.
A TL2 tensor (microsoft/BitNet ``utils/convert-hf-to-gguf-bitnet.py``) has the float shape and the
bytes of :func:`tsar.kernels.formats.tl2.pack`, whose layout depends on the kernel config
(``include/kernel_config.ini``) bitnet.cpp converted the file with, which the file does not record:
the (BM, BK) of each shape come from that config when given (``tl2_config``), else from bitnet.cpp's
published presets. Its scale is a companion F32 tensor ``<name>_scale`` holding one value, written as
a 0-dimensional tensor (gguf-py writes a numpy scalar so; it reads here as shape [1]).

The header is parsed here rather than by ``gguf.GGUFReader``: that reader rejects ids 36 and 38,
reads 39 as MXFP4, and takes 16 s (3 s even without its memmap slicing) to parse the 128k tokens
and 280k merges of a Llama-3 tokenizer; the parser below takes well under a second. The ``gguf``
package provides the type enum, block sizes and the dequantizers of the non-ternary types.

Every malformed or unsupported input raises :class:`tsar.errors.UserError` with one line that names
the file and the tensor or key at fault.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize

from tsar.errors import UserError
from tsar.kernels.formats import i2s, tl2, tq1_0, tq2_0
from tsar.kernels.quant import ternarize
from tsar.models import ModelConfig

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS

I2_S, I8_S, TL1, TL2 = 36, 37, 38, 39
BITNET_TYPE_NAMES = {I2_S: "I2_S", I8_S: "I8_S", TL1: "TL1", TL2: "TL2"}
"""bitnet.cpp's type ids (microsoft/BitNet's llama.cpp fork, ``ggml.h``: GGML_TYPE_I2_S = 36 ...)."""
I2S_TAIL = 32
"""Bytes after an I2_S tensor's codes; the first 4 hold its float32 scale."""
TL2_SCALE_SUFFIX = "_scale"
"""``<name>_scale``: the F32 scale of TL2 tensor ``<name>`` (bitnet.cpp's converter)."""
TL2_CONFIG_OPTION = "tsar run model --gguf FILE --tl2-config PATH"
"""How a user gives :func:`load` its ``tl2_config``."""

F32, F16, BF16 = (int(GGMLQuantizationType.F32), int(GGMLQuantizationType.F16),
                  int(GGMLQuantizationType.BF16))
TQ1, TQ2 = int(GGMLQuantizationType.TQ1_0), int(GGMLQuantizationType.TQ2_0)
FLOAT_TYPES = (F32, F16, BF16)
TERNARY_SOURCES = ("I2_S", "TL2", "TQ1_0", "TQ2_0", "F32", "F16", "BF16")
"""GGUF types a BitLinear matrix may be stored as."""

BITNET_ARCHS = ("bitnet-b1.58", "bitnet-25", "bitnet")
RELU2_ARCHS = ("bitnet-b1.58", "bitnet-25")
"""BitNet b1.58 2B4T (``relu(x)^2`` FFN); arch ``bitnet`` (1bitLLM models) uses SiLU."""
ARCHS = (*BITNET_ARCHS, "llama")

LINEARS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
NORMS = ("attn_norm", "ffn_norm")
SUB_NORMS = ("attn_sub_norm", "ffn_sub_norm")

# GGUF metadata value types (gguf.GGUFValueType): struct format of the scalars.
_SCALAR_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                   10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


def type_name(type_id: int) -> str:
    """Name of a GGUF tensor type id: bitnet.cpp's for 36..39 ("I2_S", "I8_S", "TL1", "TL2"), else
    the ``gguf`` enum's ("F16", "TQ2_0", ...), else ``"type <id>"``."""
    if type_id in BITNET_TYPE_NAMES:
        return BITNET_TYPE_NAMES[type_id]
    try:
        return GGMLQuantizationType(type_id).name
    except ValueError:
        return f"type {type_id}"


@dataclass(frozen=True)
class Hyper:
    """What a forward pass needs, read from the GGUF metadata (``{arch}.…`` keys)."""

    arch: str            # general.architecture: "bitnet-b1.58", "bitnet-25", "bitnet", "llama"
    vocab: int           # rows of token_embd
    hidden: int          # {arch}.embedding_length
    intermediate: int    # {arch}.feed_forward_length
    layers: int          # {arch}.block_count
    heads: int           # {arch}.attention.head_count
    kv_heads: int        # {arch}.attention.head_count_kv (default: heads)
    head_dim: int        # {arch}.attention.key_length (default: hidden / heads)
    context_length: int  # {arch}.context_length (tokens)
    rope_theta: float    # {arch}.rope.freq_base (default 10000)
    rms_eps: float       # {arch}.attention.layer_norm_rms_epsilon (default 1e-5)
    ffn_act: str         # "relu2" (relu(gate)^2 * up) for bitnet-b1.58 / bitnet-25, else "silu"
    rope_neox: bool      # True: rotate halves (NEOX), the bitnet archs; False: interleaved pairs (llama)
    sub_norms: bool      # attn_sub_norm / ffn_sub_norm present
    bos: int | None      # tokenizer.ggml.bos_token_id
    eos: int | None      # tokenizer.ggml.eos_token_id
    tokens: tuple[str, ...] = field(repr=False)  # tokenizer.ggml.tokens (() if absent)
    merges: tuple[str, ...] = field(repr=False)  # tokenizer.ggml.merges (may be empty)
    tokenizer: str       # tokenizer.ggml.model ("gpt2", "llama", or "")

    def model_config(self, name: str) -> ModelConfig:
        """The BitLinear shapes of this model as a :class:`tsar.models.ModelConfig`."""
        return ModelConfig(name, self.hidden, self.intermediate, self.layers, self.heads,
                           kv_heads=self.kv_heads, head_dim=self.head_dim, vocab=self.vocab,
                           ffn_act=self.ffn_act, sub_norms=self.sub_norms,
                           source=f"GGUF metadata (architecture {self.arch})")


@dataclass(frozen=True)
class Ternary:
    """One BitLinear matrix: ``W ~= w_t * scale``."""

    name: str         # GGUF tensor name, e.g. "blk.0.attn_q.weight"
    w_t: np.ndarray   # int8 (M, K) in {-1, 0, +1}: M outputs (rows), K inputs; y = W x
    scale: float      # per-tensor scale (0.0 only for an all-zero matrix)
    source: str       # GGUF type it was stored as: one of TERNARY_SOURCES

    @property
    def shape(self) -> tuple[int, int]:
        """(M, K)."""
        return int(self.w_t.shape[0]), int(self.w_t.shape[1])


@dataclass
class Checkpoint:
    """A loaded checkpoint. Float arrays stored as F32 are read-only views of the mapped file."""

    path: Path
    hyper: Hyper
    token_embd: np.ndarray     # float32 (vocab, hidden), dequantized
    output: np.ndarray | None  # float32 (vocab, hidden); None where the LM head is tied to token_embd
    head_type: str             # GGUF type of the LM head as stored (output.weight's, else token_embd's)
    output_norm: np.ndarray    # float32 (hidden,)
    blocks: list[dict[str, Ternary | np.ndarray]]
    """Per layer: "attn_norm", "ffn_norm" (and "attn_sub_norm", "ffn_sub_norm" where
    ``hyper.sub_norms``): float32 vectors (hidden,), ffn_sub_norm (intermediate,); "attn_q",
    "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down": :class:`Ternary`."""
    tensor_types: dict[str, str] = field(default_factory=dict)
    """GGUF type name of every tensor in the file, by tensor name."""

    def types(self) -> dict[str, int]:
        """Number of tensors per GGUF type name, most frequent first (for a summary line)."""
        return dict(Counter(self.tensor_types.values()).most_common())

    def ternaries(self) -> list[Ternary]:
        """Every BitLinear matrix, layer by layer in :data:`LINEARS` order."""
        return [t for b in self.blocks for name in LINEARS if isinstance(t := b[name], Ternary)]


@dataclass(frozen=True)
class _Info:
    """One entry of the tensor-info table."""

    name: str
    ne: tuple[int, ...]  # ggml order: ne[0] is the row length
    type_id: int
    offset: int          # absolute file offset of the data

    @property
    def n(self) -> int:
        return math.prod(self.ne)


def _strip(ne: tuple[int, ...]) -> tuple[int, ...]:
    """``ne`` without trailing 1s (ggml pads shapes with them)."""
    out = list(ne)
    while len(out) > 1 and out[-1] == 1:
        out.pop()
    return tuple(out)


def _ne_str(ne: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, ne)) + "]"


class _Parser:
    """Bounds-checked little-endian reads from the mapped file."""

    def __init__(self, buf: mmap.mmap, size: int, fail: Callable[[str], UserError]) -> None:
        self.buf, self.size, self.fail, self.off = buf, size, fail, 0

    def truncated(self, what: str, at: int) -> UserError:
        return self.fail(f"truncated: {what} at byte {at} runs past the end of the file ({self.size} bytes)")

    def take(self, n: int, what: str) -> int:
        start = self.off
        if start + n > self.size:
            raise self.truncated(what, start)
        self.off = start + n
        return start

    def scalar(self, fmt: str, what: str) -> Any:
        return struct.unpack_from(fmt, self.buf, self.take(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        n = self.scalar("<Q", what)
        start = self.take(n, what)
        try:
            return self.buf[start:start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what}: string at byte {start} is not UTF-8") from None

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype in _SCALAR_FORMATS:
            return self.scalar(_SCALAR_FORMATS[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY or depth > 2:
            raise self.fail(f"{what}: unknown metadata value type {vtype}")
        sub = self.scalar("<I", what)
        count = self.scalar("<Q", what)
        if sub in _SCALAR_FORMATS:
            dtype = np.dtype(_SCALAR_FORMATS[sub].replace("?", "u1"))
            start = self.take(count * dtype.itemsize, what)
            arr = np.frombuffer(self.buf, dtype, count, start).copy()
            return arr.astype(bool) if sub == 7 else arr
        if sub == _STRING:
            return self.strings(count, what)
        if count * 12 > self.size - self.off:  # an array holds at least a type and a count
            raise self.truncated(what, self.off)
        return [self.value(sub, what, depth + 1) for _ in range(count)]

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings, fast (a Llama-3 tokenizer has 400k)."""
        buf, size, off = self.buf, self.size, self.off
        if count * 8 > size - off:
            raise self.truncated(what, off)
        unpack = _U64.unpack_from
        out = []
        try:
            for _ in range(count):
                if off + 8 > size:
                    break
                n = unpack(buf, off)[0]
                end = off + 8 + n
                if end > size:
                    break
                out.append(buf[off + 8:end].decode("utf-8"))
                off = end
        except UnicodeDecodeError:
            raise self.fail(f"{what}: string {len(out)} at byte {off} is not UTF-8") from None
        if len(out) < count:
            raise self.truncated(f"{what} (string {len(out)} of {count})", off)
        self.off = off
        return out


class _File:
    """A mapped GGUF file: metadata, tensor infos and raw tensor bytes."""

    def __init__(self, path: Path, tl2_blocks: dict[tuple[int, int], tuple[int, int]] | None = None,
                 tl2_config: Path | None = None) -> None:
        self.path = path
        self.tl2_blocks = dict(tl2.PRESETS) if tl2_blocks is None else tl2_blocks
        self.tl2_config = tl2_config
        if not path.exists():
            raise self.error("no such file")
        if not path.is_file():
            raise self.error("not a regular file")
        self.size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 4 or head[:4] != MAGIC:
                raise self.error(f"not a GGUF file (starts with {head[:4]!r}, expected {MAGIC!r})")
            self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.fields: dict[str, Any] = {}
        self.infos: dict[str, _Info] = {}
        self._parse_header()
        self.arch = self.fields.get("general.architecture", "")
        self._spans = self._tensor_spans()
        self.type_names = {name: self.type_name(info) for name, info in self.infos.items()}
        self._check_layout()

    def error(self, what: str) -> UserError:
        return UserError(f"{self.path}: {what}")

    def _parse_header(self) -> None:
        p = _Parser(self.buf, self.size, self.error)
        p.off = 4
        version = p.scalar("<I", "GGUF version")
        if version not in VERSIONS:
            if version and not version & 0xFFFF:
                raise self.error("big-endian GGUF files are not supported")
            raise self.error(f"GGUF version {version} is not supported (expected 2 or 3)")
        n_tensors = p.scalar("<Q", "tensor count")
        n_kv = p.scalar("<Q", "metadata count")
        if n_kv * 13 + n_tensors * 32 > self.size:  # smallest key/value, smallest tensor info
            raise self.error(f"truncated or corrupt header: {n_kv} metadata keys and {n_tensors} "
                             f"tensors cannot fit in {self.size} bytes")
        for i in range(n_kv):
            key = p.string(f"metadata key {i}")
            what = f"metadata key {key!r}"
            vtype = p.scalar("<I", what)
            if key in self.fields:
                raise self.error(f"duplicate {what}")
            self.fields[key] = p.value(vtype, what)
        for i in range(n_tensors):
            name = p.string(f"tensor info {i}")
            what = f"tensor info of {name!r}"
            n_dims = p.scalar("<I", what)
            if n_dims > MAX_DIMS:
                raise self.error(f"{what}: {n_dims} dimensions (expected at most {MAX_DIMS})")
            ne = tuple(int(x) for x in struct.unpack_from(f"<{n_dims}Q", self.buf, p.take(8 * n_dims, what)))
            ne = ne or (1,)  # a scalar (0 dimensions), as ggml reads it
            type_id = p.scalar("<I", what)
            offset = p.scalar("<Q", what)
            if name in self.infos:
                raise self.error(f"duplicate tensor {name!r}")
            if min(ne) < 1 or math.prod(ne) > self.size * 8:
                raise self.error(f"{what}: impossible shape {_ne_str(ne)}")
            self.infos[name] = _Info(name, ne, type_id, offset)
        align = self.fields.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(align, int) or isinstance(align, bool) or align < 1 or align & (align - 1):
            raise self.error(f"metadata key 'general.alignment' = {align!r} is not a power of two")
        start = -(-p.off // align) * align
        self.alignment = align
        self.infos = {n: _Info(i.name, i.ne, i.type_id, start + i.offset) for n, i in self.infos.items()}

    def _tensor_spans(self) -> dict[str, int]:
        """Bytes from each tensor's offset to the next tensor's (or to the end of the file)."""
        order = sorted(self.infos.values(), key=lambda i: i.offset)
        ends = [i.offset for i in order[1:]] + [self.size]
        return {i.name: max(end - i.offset, 0) for i, end in zip(order, ends, strict=True)}

    def is_tl2(self, info: _Info) -> bool:
        """Whether id 39 means bitnet.cpp's TL2 (not MXFP4): a bitnet arch, a ``<name>_scale``
        companion tensor (bitnet.cpp's converter writes one), or too few bytes for MXFP4."""
        if info.type_id != TL2:
            return False
        if self.arch in BITNET_ARCHS or f"{info.name}_scale" in self.infos:
            return True
        block, size = GGML_QUANT_SIZES[GGMLQuantizationType.MXFP4]
        return info.ne[0] % block != 0 or info.n // block * size > self._spans[info.name]

    def type_name(self, info: _Info) -> str:
        if info.type_id == TL2 and not self.is_tl2(info):
            return GGMLQuantizationType.MXFP4.name
        return type_name(info.type_id)

    def tl2_shape(self, info: _Info) -> tuple[int, int, int, int] | None:
        """(M, K, BM, BK) of a TL2 tensor (ne = [K, M]); None where no config or preset has its shape."""
        ne = _strip(info.ne)
        if len(ne) != 2 or (ne[1], ne[0]) not in self.tl2_blocks:
            return None
        return (ne[1], ne[0], *self.tl2_blocks[ne[1], ne[0]])

    def nbytes(self, info: _Info) -> int | None:
        """Bytes of a tensor's data, None where the type or shape gives no size."""
        if info.type_id == I2_S:
            return info.n // 4 + I2S_TAIL if info.n % 4 == 0 else None
        if info.type_id == TL2 and self.is_tl2(info):
            shape = self.tl2_shape(info)
            return None if shape is None else tl2.stored_nbytes(shape[0], shape[1], shape[3])
        if info.type_id in (I8_S, TL1):
            return None
        try:
            block, size = GGML_QUANT_SIZES[GGMLQuantizationType(info.type_id)]
        except (ValueError, KeyError):
            return None
        return info.n // block * size if info.ne[0] % block == 0 else None

    def _check_layout(self) -> None:
        """Every tensor's data aligned, inside the file and apart from the next tensor's."""
        order = sorted(self.infos.values(), key=lambda i: i.offset)
        for info, after in zip(order, [*order[1:], None], strict=True):
            n = self.nbytes(info) or 0
            if info.offset % self.alignment:
                raise self.error(f"tensor {info.name!r}: data offset {info.offset} is not a multiple of "
                                 f"the alignment {self.alignment}")
            span = self._spans[info.name]
            if self.type_names[info.name] == "TL2" and n and not n <= span < n + self.alignment:
                m, k, bm, bk = self.tl2_shape(info) or (0, 0, 0, 0)
                what = "truncated" if span < n else "oversized"
                raise self.error(f"{what}: tensor {info.name!r} (TL2 {_ne_str(info.ne)}) has {span} bytes "
                                 f"before the {'next tensor' if after else 'end of the file'}, but TL2 "
                                 f"M {m} x K {k} (bm {bm}, bk {bk}) takes {n}")
            if info.offset + n > self.size:
                raise self.error(f"truncated: tensor {info.name!r} ({self.type_names[info.name]} "
                                 f"{_ne_str(info.ne)}) needs bytes {info.offset}..{info.offset + n} but "
                                 f"the file has {self.size}")
            if after is not None and info.offset + n > after.offset:
                raise self.error(f"tensors {info.name!r} and {after.name!r} overlap (corrupt tensor table)")

    def raw(self, info: _Info) -> np.ndarray:
        """The tensor's bytes, uint8 (read-only view of the mapped file)."""
        n = self.nbytes(info)
        if n is None:
            raise self.unsupported(info, "a tensor")
        return np.frombuffer(self.buf, np.uint8, n, info.offset)

    def unsupported(self, info: _Info, role: str, expected: str = "") -> UserError:
        name = self.type_names[info.name]
        if name in ("TL1", "I8_S"):
            why = f"{name} tensors are not supported (a bitnet.cpp kernel-specific layout)"
        elif info.ne[0] % _block(info.type_id):
            why = f"row length {info.ne[0]} is not a multiple of the {name} block ({_block(info.type_id)})"
        else:
            label = name if name.startswith("type ") else f"type {name}"
            why = f"{label} is not supported for {role}" + (f" (expected {expected})" if expected else "")
        return self.error(f"tensor {info.name!r} ({name} {_ne_str(info.ne)}): {why}")


def _block(type_id: int) -> int:
    """Weights per block of a ggml type (1 for unknown ids and bitnet.cpp's)."""
    if type_id in BITNET_TYPE_NAMES:
        return 1
    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType(type_id)][0]
    except (ValueError, KeyError):
        return 1


class _Loader:
    """Builds a :class:`Checkpoint` from a :class:`_File`, tracking which tensors it used."""

    def __init__(self, f: _File) -> None:
        self.f = f
        self.used: set[str] = set()

    # --- metadata ------------------------------------------------------------------------------
    def key(self, key: str, default: Any = None, required: bool = False) -> Any:
        if key not in self.f.fields:
            if required:
                raise self.f.error(f"missing metadata key {key!r}")
            return default
        return self.f.fields[key]

    def count(self, key: str, default: int | None = None) -> int:
        """A positive integer key; a per-layer array is accepted when all its entries are equal."""
        value = self.key(key, default, required=default is None)
        if isinstance(value, np.ndarray) and value.size and (value == value.flat[0]).all():
            value = value.flat[0].item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
            raise self.f.error(f"metadata key {key!r} = {_short(value)} is not a positive integer "
                               "(per-layer values must all be equal)")
        return int(value)

    def real(self, key: str, default: float) -> float:
        value = self.key(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value <= 0:
            raise self.f.error(f"metadata key {key!r} = {_short(value)} is not a positive number")
        return float(value)

    def token_id(self, key: str, vocab: int) -> int | None:
        value = self.key(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < vocab:
            raise self.f.error(f"metadata key {key!r} = {_short(value)} is not a token id below {vocab}")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.key(key, [])
        if isinstance(value, np.ndarray) and value.size == 0:  # an empty array of another type
            return ()
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise self.f.error(f"metadata key {key!r} is not an array of strings")
        return tuple(value)

    def hyper(self) -> Hyper:
        arch = self.key("general.architecture", required=True)
        if arch not in ARCHS:
            raise self.f.error(f"architecture {_short(arch)} is not supported (expected one of "
                               f"{', '.join(ARCHS)})")
        hidden = self.count(f"{arch}.embedding_length")
        layers = self.count(f"{arch}.block_count")
        intermediate = self.count(f"{arch}.feed_forward_length")
        heads = self.count(f"{arch}.attention.head_count")
        context = self.count(f"{arch}.context_length")
        kv_heads = self.count(f"{arch}.attention.head_count_kv", heads)
        if heads % kv_heads:
            raise self.f.error(f"head_count {heads} is not a multiple of head_count_kv {kv_heads}")
        default_hd = hidden // heads if hidden % heads == 0 else 0
        head_dim = self.count(f"{arch}.attention.key_length", default_hd or None)
        for key in (f"{arch}.attention.value_length", f"{arch}.rope.dimension_count"):
            if key in self.f.fields and self.count(key) != head_dim:
                raise self.f.error(f"metadata key {key!r} = {self.count(key)} differs from the head "
                                   f"dimension {head_dim} (not supported)")
        scaling = self.key(f"{arch}.rope.scaling.type", "none")
        if scaling not in ("none", "linear"):
            raise self.f.error(f"metadata key '{arch}.rope.scaling.type' = {_short(scaling)}: "
                               "RoPE scaling is not supported")
        for key in (f"{arch}.rope.scaling.factor", f"{arch}.rope.scale_linear"):  # llama.cpp: 0 means 1
            if self.key(key, 1.0) not in (0.0, 1.0):  # upstream's bitnet converter writes linear, 1.0
                raise self.f.error(f"metadata key {key!r} = {_short(self.key(key))}: RoPE scaling is not "
                                   "supported")
        tokens = self.strings("tokenizer.ggml.tokens")
        embd = self.f.infos.get("token_embd.weight")
        if embd is None:
            raise self.f.error("missing tensor 'token_embd.weight'")
        vocab = self.count(f"{arch}.vocab_size", len(tokens) or embd.ne[-1])
        if tokens and len(tokens) != vocab:
            raise self.f.error(f"tokenizer.ggml.tokens has {len(tokens)} tokens but "
                               f"'{arch}.vocab_size' is {vocab}")
        tokenizer = self.key("tokenizer.ggml.model", "")
        if not isinstance(tokenizer, str):
            raise self.f.error("metadata key 'tokenizer.ggml.model' is not a string")
        return Hyper(
            arch=arch, vocab=vocab, hidden=hidden, intermediate=intermediate, layers=layers,
            heads=heads, kv_heads=kv_heads, head_dim=head_dim, context_length=context,
            rope_theta=self.real(f"{arch}.rope.freq_base", 10000.0),
            rms_eps=self.real(f"{arch}.attention.layer_norm_rms_epsilon", 1e-5),
            ffn_act="relu2" if arch in RELU2_ARCHS else "silu",
            rope_neox=arch in BITNET_ARCHS,
            sub_norms="blk.0.attn_sub_norm.weight" in self.f.infos,
            bos=self.token_id("tokenizer.ggml.bos_token_id", vocab),
            eos=self.token_id("tokenizer.ggml.eos_token_id", vocab),
            tokens=tokens, merges=self.strings("tokenizer.ggml.merges"), tokenizer=tokenizer)

    # --- tensors -------------------------------------------------------------------------------
    def info(self, name: str, ne: tuple[int, ...], meaning: str) -> _Info:
        info = self.f.infos.get(name)
        if info is None:
            raise self.f.error(f"missing tensor {name!r}")
        if _strip(info.ne) != _strip(ne):
            raise self.f.error(f"tensor {name!r} has shape {_ne_str(info.ne)} (ggml order, row length "
                               f"first), expected {_ne_str(ne)} from the metadata ({meaning})")
        self.used.add(name)
        return info

    def floats(self, name: str, ne: tuple[int, ...], meaning: str) -> np.ndarray:
        """A non-BitLinear tensor dequantized to float32, numpy shape ``reversed(ne)``."""
        info = self.info(name, ne, meaning)
        shape = tuple(reversed(_strip(ne)))
        if info.type_id == I2_S:
            w_t, scale = self.i2s(info, math.prod(shape[:-1]), shape[-1])
            return (w_t.astype(np.float32) * np.float32(scale)).reshape(shape)
        if self.f.type_names[name] == "TL2":  # bitnet.cpp's converter writes BitLinear matrices only
            raise self.f.unsupported(info, "an embedding, LM head or norm")
        raw = self.f.raw(info)
        if info.type_id == F32:
            out = raw.view("<f4")
        elif info.type_id == F16:
            out = raw.view("<f2").astype(np.float32)
        else:
            try:
                qtype = GGMLQuantizationType(info.type_id)
                with np.errstate(all="ignore"):
                    out = dequantize(raw.reshape(math.prod(shape[:-1]), -1), qtype)
                out = out.astype(np.float32, copy=False)
            except (ValueError, NotImplementedError):
                raise self.f.unsupported(info, "an embedding, LM head or norm") from None
        if not np.isfinite(out).all():
            raise self.f.error(f"tensor {name!r} ({self.f.type_names[name]}) has non-finite values")
        return out.reshape(shape)

    def vector(self, name: str, n: int, meaning: str) -> np.ndarray:
        return self.floats(name, (n,), meaning)

    def ternary(self, name: str, m: int, k: int, meaning: str) -> Ternary:
        """BitLinear matrix ``name``, M outputs x K inputs (stored ne = [K, M])."""
        info = self.info(name, (k, m), meaning)
        t = info.type_id
        if t == I2_S:
            w_t, scale = self.i2s(info, m, k)
        elif self.f.type_names[name] == "TL2":
            w_t, scale = self.tl2(info, m, k)
        elif t in (TQ1, TQ2):
            w_t, scale = self.tq(info, m, k)
        elif t in FLOAT_TYPES:
            w_t, scale = self.from_floats(info, m, k)
        else:
            raise self.f.unsupported(info, "a BitLinear matrix", ", ".join(TERNARY_SOURCES))
        extra = name.removesuffix(".weight") + ".scale"  # upstream llama.cpp's optional bitnet scale
        if extra in self.f.infos:
            factor = self.vector(extra, 1, "one per-tensor scale")
            scale *= float(factor[0])
        return Ternary(name, w_t, float(scale), self.f.type_names[name])

    def check_codes(self, info: _Info, w_t: np.ndarray, code_meaning: str) -> np.ndarray:
        """Reject decoded values outside {-1, 0, 1} (code 3 of the 2-bit formats)."""
        if w_t.size and w_t.max() > 1:
            r, c = np.unravel_index(int(np.argmax(w_t > 1)), w_t.shape)
            raise self.f.error(f"tensor {info.name!r} ({self.f.type_names[info.name]}): {code_meaning} "
                               f"at row {r}, column {c} is not a ternary value")
        return w_t

    def i2s(self, info: _Info, m: int, k: int) -> tuple[np.ndarray, float]:
        if (m * k) % i2s.BLOCK:
            raise self.f.error(f"tensor {info.name!r} (I2_S {_ne_str(info.ne)}): {m * k} weights are "
                               f"not a multiple of the {i2s.BLOCK}-weight I2_S block")
        packed = i2s.I2SWeights(self.f.raw(info), m, k)
        w_t = self.check_codes(info, i2s.unpack(packed), "code 3")
        scale = packed.scale
        if not math.isfinite(scale) or scale < 0:
            raise self.f.error(f"tensor {info.name!r} (I2_S): scale {scale} in the tail is not a "
                               "finite non-negative number")
        return w_t, scale

    def tl2(self, info: _Info, m: int, k: int) -> tuple[np.ndarray, float]:
        shape = self.f.tl2_shape(info)
        if shape is None:
            where = f"in neither {self.f.tl2_config} nor" if self.f.tl2_config else "not in"
            raise self.f.error(f"tensor {info.name!r} (TL2 {_ne_str(info.ne)}): M {m} x K {k} is {where} "
                               "bitnet.cpp's published TL2 kernel presets: give the "
                               f"include/kernel_config.ini bitnet.cpp converted the file with "
                               f"({TL2_CONFIG_OPTION})")
        bm, bk = shape[2:]
        w_t = tl2.unpack(tl2.TL2Weights(self.f.raw(info), m, k, bm, bk))
        if w_t.size and (w_t.min() < -1 or w_t.max() > 1):
            r, c = np.unravel_index(int(np.argmax(np.abs(w_t) > 1)), w_t.shape)
            raise self.f.error(f"tensor {info.name!r} (TL2, bm {bm}, bk {bk}): the index at row {r}, "
                               f"column {c} is not a ternary value (a corrupt tensor or another kernel "
                               "config)")
        name = info.name + TL2_SCALE_SUFFIX
        scale_info = self.f.infos.get(name)
        if scale_info is None:
            raise self.f.error(f"tensor {info.name!r} (TL2): missing its scale tensor {name!r}")
        if scale_info.type_id != F32 or scale_info.n != 1:
            raise self.f.error(f"tensor {name!r} ({self.f.type_names[name]} {_ne_str(scale_info.ne)}) is not "
                               f"one F32 value (the scale of TL2 tensor {info.name!r})")
        self.used.add(name)
        scale = float(self.f.raw(scale_info).view("<f4")[0])
        if not math.isfinite(scale) or scale < 0:
            raise self.f.error(f"tensor {name!r}: scale {scale} is not a finite non-negative number")
        return w_t, scale

    def tq(self, info: _Info, m: int, k: int) -> tuple[np.ndarray, float]:
        fmt = tq1_0 if info.type_id == TQ1 else tq2_0
        cls = tq1_0.TQ1Weights if info.type_id == TQ1 else tq2_0.TQ2Weights
        packed = cls(self.f.raw(info), m, k)
        w_t = self.check_codes(info, fmt.unpack(packed), "code 3")
        nonzero = (w_t.reshape(m, k // fmt.BLOCK, fmt.BLOCK) != 0).any(axis=2)
        d = packed.scales[nonzero]
        if d.size == 0:
            return w_t, 0.0
        where = np.argwhere(nonzero)
        bad = np.flatnonzero(~np.isfinite(d) | (d <= 0))
        if bad.size:
            r, b = where[bad[0]]
            raise self.f.error(f"tensor {info.name!r} ({self.f.type_names[info.name]}): block {b} of row "
                               f"{r} has scale d = {d[bad[0]]}, not a positive number")
        differ = np.flatnonzero(d != d[0])
        if differ.size:
            (r0, b0), (r, b) = where[0], where[differ[0]]
            raise self.f.error(f"tensor {info.name!r} ({self.f.type_names[info.name]}): blocks carry "
                               f"different scales (d = {d[0]:g} at row {r0} block {b0}, {d[differ[0]]:g} "
                               f"at row {r} block {b}); per-block scales are not a BitNet tensor")
        return w_t, float(d[0])

    def from_floats(self, info: _Info, m: int, k: int) -> tuple[np.ndarray, float]:
        """Float weights: exact when already ternary-valued (0 and ±s only, what BitNet's converters
        write), else :func:`tsar.kernels.quant.ternarize` (absmean)."""
        raw = self.f.raw(info)
        if info.type_id == F32:
            w = raw.view("<f4").reshape(m, k)
        elif info.type_id == F16:
            w = raw.view("<f2").reshape(m, k)
        else:  # BF16: the top half of a float32
            w = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(m, k)
        if not np.isfinite(w).all():
            raise self.f.error(f"tensor {info.name!r} ({self.f.type_names[info.name]}) has non-finite values")
        a = np.abs(w)
        s = a.max() if a.size else 0
        if s == 0:
            return np.zeros((m, k), np.int8), 0.0
        if a.min(where=a > 0, initial=s) == s:
            return np.sign(w).astype(np.int8), float(s)
        return ternarize(np.asarray(w, np.float32))

    def checkpoint(self) -> Checkpoint:
        h = self.hyper()
        q_dim, kv_dim = h.heads * h.head_dim, h.kv_heads * h.head_dim
        hd = f"head_dim {h.head_dim}"
        embd = self.floats("token_embd.weight", (h.hidden, h.vocab), f"hidden {h.hidden}, vocab {h.vocab}")
        output = None
        head_type = self.f.type_names["token_embd.weight"]
        if "output.weight" in self.f.infos:
            output = self.floats("output.weight", (h.hidden, h.vocab), f"hidden {h.hidden}, vocab {h.vocab}")
            head_type = self.f.type_names["output.weight"]
        out_norm = self.vector("output_norm.weight", h.hidden, f"hidden {h.hidden}")
        shapes = {  # name: (M, K, meaning)
            "attn_q": (q_dim, h.hidden, f"heads {h.heads} x {hd} outputs, hidden {h.hidden} inputs"),
            "attn_k": (kv_dim, h.hidden, f"kv heads {h.kv_heads} x {hd} outputs, hidden {h.hidden} inputs"),
            "attn_v": (kv_dim, h.hidden, f"kv heads {h.kv_heads} x {hd} outputs, hidden {h.hidden} inputs"),
            "attn_output": (h.hidden, q_dim, f"hidden {h.hidden} outputs, heads {h.heads} x {hd} inputs"),
            "ffn_gate": (h.intermediate, h.hidden, f"intermediate {h.intermediate}, hidden {h.hidden}"),
            "ffn_up": (h.intermediate, h.hidden, f"intermediate {h.intermediate}, hidden {h.hidden}"),
            "ffn_down": (h.hidden, h.intermediate, f"hidden {h.hidden}, intermediate {h.intermediate}"),
        }
        hidden, inter = (h.hidden, f"hidden {h.hidden}"), (h.intermediate, f"intermediate {h.intermediate}")
        norms = {"attn_norm": hidden, "ffn_norm": hidden}
        if h.sub_norms:
            norms |= {"attn_sub_norm": hidden, "ffn_sub_norm": inter}
        blocks: list[dict[str, Ternary | np.ndarray]] = []
        for i in range(h.layers):
            block: dict[str, Ternary | np.ndarray] = {}
            for role, (n, meaning) in norms.items():
                block[role] = self.vector(f"blk.{i}.{role}.weight", n, meaning)
            for role, (m, k, meaning) in shapes.items():
                block[role] = self.ternary(f"blk.{i}.{role}.weight", m, k, meaning)
            blocks.append(block)
        self.check_unused(h)
        return Checkpoint(self.f.path, h, embd, output, head_type, out_norm, blocks, dict(self.f.type_names))

    def check_unused(self, h: Hyper) -> None:
        for name in self.f.infos:
            if name in self.used:
                continue
            parts = name.split(".")
            if name.endswith(".bias"):
                why = "biases are not supported"
            elif name == "rope_freqs.weight":
                why = "RoPE frequency factors (Llama 3.1 rope scaling) are not supported"
            elif parts[0] == "blk" and len(parts) > 1 and parts[1].isdigit() and int(parts[1]) >= h.layers:
                why = f"the metadata says {h.layers} layers"
            elif not h.sub_norms and name.startswith("blk.") and any(f".{s}." in name for s in SUB_NORMS):
                why = "sub-norms must be present in every layer or in none (blk.0 has none)"
            else:
                why = f"not part of the {h.arch} layout this reader supports"
            raise self.f.error(f"unexpected tensor {name!r}: {why}")


def _short(value: Any) -> str:
    """A metadata value for an error message: one line, at most 60 characters."""
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(path: str | Path, tl2_config: str | Path | None = None) -> Checkpoint:
    """Read a BitNet-style ternary checkpoint from the GGUF file at ``path``.

    BitLinear matrices may be I2_S or TL2 (bitnet.cpp), TQ1_0, TQ2_0 or F32/F16/BF16; embeddings, LM
    head and norms any type ``gguf.quants`` dequantizes (F32, F16, BF16, Q8_0, Q4_K, Q6_K, ...) or I2_S.
    ``tl2_config``: the ``include/kernel_config.ini`` bitnet.cpp converted a TL2 file with; its
    shapes take precedence over the published presets (:data:`tsar.kernels.formats.tl2.PRESETS`).
    Raises :class:`UserError` (one line: file, tensor or key, problem) for any bad or unsupported input.
    """
    blocks = dict(tl2.PRESETS)
    config = None if tl2_config is None else Path(tl2_config)
    if config is not None:
        try:
            blocks |= tl2.read_config(config)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    return _Loader(_File(Path(path), blocks, config)).checkpoint()
