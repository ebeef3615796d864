"""Model configurations and their BitLinear shapes, plus the paper's reported numbers.

Shape convention: a BitLinear layer is ``M x K`` with ``M`` outputs and ``K`` inputs (weights
``W[M][K]``, ``y = W x``); GEMV (decode) multiplies by ``N = 1`` activation vector, GEMM
(prefill) by ``N = 128``. Per transformer layer:

* ``qkv``: Q, K and V projections fused into one matrix, ``M = (heads + 2 * kv_heads) * head_dim``,
  ``K = hidden``. With grouped-query attention (``kv_heads < heads``) the K and V projections
  have only ``kv_heads * head_dim`` outputs each (BitNet-b1.58-2B-4T: (20 + 2*5) * 128 = 2560 +
  2*640 = 3840).
* ``o``: ``M = hidden``, ``K = heads * head_dim``.
* ``gate``, ``up``: ``M = intermediate``, ``K = hidden`` (separate matrices; a kernel may fuse
  them into one ``2*intermediate x hidden``).
* ``down``: ``M = hidden``, ``K = intermediate``.

The other operators of a token (embedding, norms, RoPE, attention over the KV cache, the FFN
activation, the LM head, sampling) are described by the rest of :class:`ModelConfig` (vocabulary,
LM-head precision, activation, sub-norms) and timed by :mod:`tsar.estimate.operators`. The BitNet
125M..100B configurations (bitnet.cpp paper, appendix A) give no KV-head count: they are multi-head
(``kv_heads = heads``), ``head_dim = hidden / heads``; nor a vocabulary: they take the 32,002
tokens of the 1bitLLM BitNet b1.58 reproductions (``bitnet_b1_58-large`` / ``-3B`` config.json)
the bitnet.cpp benchmarks ran.

LM heads are float16 in every model: bitnet.cpp's converter keeps ``lm_head`` / the tied embedding
unquantized and its quantizer stores ``output.weight`` (or ``token_embd.weight`` where tied) as F16
for I2_S / TQ1_0 / TQ2_0 models (microsoft/BitNet ``utils/convert-hf-to-gguf-bitnet.py``; its
llama.cpp fork's ``llama_model_quantize`` type rules); the KV cache is float16 (llama.cpp's
default ``type_k`` / ``type_v``).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFILL_TOKENS = 128
"""N of the prefill GEMM (T-SAR paper section IV-A: prefill with N = 128 tokens)."""


@dataclass(frozen=True)
class LinearShape:
    """One BitLinear matrix: ``m`` outputs x ``k`` inputs, applied ``n`` tokens at a time."""

    name: str
    m: int
    k: int
    n: int = 1

    @property
    def weights(self) -> int:
        return self.m * self.k

    @property
    def ops(self) -> int:
        """Multiply-accumulates counted as 2 ops each (the papers' Gop/s convention)."""
        return 2 * self.m * self.k * self.n

    def weight_bytes(self, bits_per_weight: float = 2.0) -> float:
        return self.weights * bits_per_weight / 8


@dataclass(frozen=True)
class ModelConfig:
    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int | None = None   # None: multi-head attention (= heads)
    head_dim: int | None = None   # None: hidden / heads
    source: str = ""
    vocab: int = 32002            # tokens (LM-head rows)
    tied: bool = False            # the LM head is the token embedding
    head_bits: int = 16           # LM-head precision (F16; see the module doc)
    ffn_act: str = "silu"         # "relu2" (BitNet b1.58 2B4T) or "silu"
    sub_norms: bool = True        # BitNet's attn_sub_norm / ffn_sub_norm

    def __post_init__(self) -> None:
        if self.head_dim is None and self.hidden % self.heads:
            raise ValueError(f"{self.name}: hidden {self.hidden} not divisible by heads {self.heads}")
        if self.heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: heads {self.heads} not a multiple of kv heads {self.n_kv_heads}")

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def layer_shapes(self, n: int = 1) -> tuple[LinearShape, ...]:
        """The BitLinear matrices of one transformer layer for ``n`` tokens."""
        hd = self.dim_head
        return (
            LinearShape("qkv", (self.heads + 2 * self.n_kv_heads) * hd, self.hidden, n),
            LinearShape("o", self.hidden, self.heads * hd, n),
            LinearShape("gate", self.intermediate, self.hidden, n),
            LinearShape("up", self.intermediate, self.hidden, n),
            LinearShape("down", self.hidden, self.intermediate, n),
        )

    def gemv_shapes(self) -> tuple[LinearShape, ...]:
        """Decode: N = 1."""
        return self.layer_shapes(1)

    def gemm_shapes(self, n: int = PREFILL_TOKENS) -> tuple[LinearShape, ...]:
        """Prefill: N = 128 unless given."""
        return self.layer_shapes(n)

    @property
    def linear_weights(self) -> int:
        """Ternary weights in all BitLinear layers (embeddings / LM head excluded)."""
        return self.layers * sum(s.weights for s in self.layer_shapes())

    def weight_bytes(self, bits_per_weight: float = 2.0) -> float:
        return self.linear_weights * bits_per_weight / 8


_BITNET_CPP = "bitnet.cpp paper (arXiv:2410.16144), appendix A"
_BITNET = {  # name: (hidden, intermediate, layers, heads)
    "bitnet-125m": (768, 3072, 11, 12),
    "bitnet-350m": (1024, 3072, 24, 16),
    "bitnet-700m": (1536, 4096, 24, 16),
    "bitnet-1b": (2048, 3584, 24, 32),
    "bitnet-1.5b": (1536, 9216, 28, 32),
    "bitnet-2.5b": (2560, 6912, 30, 20),
    "bitnet-3.8b": (3840, 8192, 24, 32),
    "bitnet-7b": (4096, 12032, 32, 32),
    "bitnet-13b": (5120, 13824, 40, 40),
    "bitnet-30b": (6656, 16384, 60, 52),
    "bitnet-70b": (8192, 24576, 80, 64),
    "bitnet-100b": (8192, 45568, 72, 64),
}

MODELS: dict[str, ModelConfig] = {
    name: ModelConfig(name, *dims, source=_BITNET_CPP) for name, dims in _BITNET.items()
}
MODELS["bitnet-b1.58-2b-4t"] = ModelConfig(
    "bitnet-b1.58-2b-4t", 2560, 6912, 30, 20, kv_heads=5, head_dim=128, vocab=128256, tied=True,
    ffn_act="relu2",
    source="BitNet b1.58 2B4T model card / config (microsoft/bitnet-b1.58-2B-4T: relu2, tied embeddings, "
           "128,256 tokens)")
MODELS["llama3-8b"] = ModelConfig(
    "llama3-8b", 4096, 14336, 32, 32, kv_heads=8, head_dim=128, vocab=128256,
    source="Llama 3 8B config (as Llama3-8B-1.58, HF1BitLLM: a separate lm_head, 128,256 tokens)")
MODELS["falcon3-10b"] = ModelConfig(
    "falcon3-10b", 3072, 23040, 40, 12, kv_heads=4, head_dim=256, vocab=131072,
    source="Falcon3-10B config (Falcon3-10B-Instruct-1.58bit; 131,072 tokens); head_dim 256 = 3072 / 12")

BITNET_2B = MODELS["bitnet-b1.58-2b-4t"]
"""BitNet b1.58 2B4T: the model whose layers the benchmarks, the validation and the report time."""

BITNET_2B_LAYERS: tuple[tuple[int, int], ...] = tuple(
    (shape.m, shape.k) for shape in BITNET_2B.layer_shapes() if shape.name in ("o", "gate", "down"))
"""BitNet-2B's distinct projection shapes as ``(M, K)``: the O projection (square, standing for QKV
too), gate/up and down (``((2560, 2560), (6912, 2560), (2560, 6912))``)."""

PAPER_MODELS = tuple(_BITNET)
"""The 125M..100B sweep of the T-SAR paper's end-to-end results (Fig. 8)."""


def get_model(name: str) -> ModelConfig:
    key = name.lower()
    if key in MODELS:
        return MODELS[key]
    if f"bitnet-{key}" in MODELS:
        return MODELS[f"bitnet-{key}"]
    endings = [m for m in MODELS if m.endswith(f"-{key}")]  # "2b-4t": bitnet-b1.58-2b-4t
    if len(endings) == 1:
        return MODELS[endings[0]]
    raise KeyError(f"unknown model {name!r} (known: {', '.join(MODELS)})")


# --- the paper's reported numbers ---------------------------------------------------------------
TSAR_PAPER = "T-SAR paper (tsar-paper.md)"


@dataclass(frozen=True)
class ReportedDecode:
    platform: str
    model: str
    tokens_per_s: float
    joules_per_token: float
    source: str = f"{TSAR_PAPER}, Table III"


TABLE_III: tuple[ReportedDecode, ...] = (
    ReportedDecode("workstation", "llama3-8b", 128.96, 0.616),
    ReportedDecode("workstation", "falcon3-10b", 103.93, 0.795),
    ReportedDecode("laptop", "llama3-8b", 61.00, 0.405),
    ReportedDecode("laptop", "falcon3-10b", 49.65, 0.540),
    ReportedDecode("mobile", "llama3-8b", 5.18, 0.733),
    ReportedDecode("mobile", "falcon3-10b", 4.30, 0.953),
    ReportedDecode("jetson-agx-orin", "llama3-8b", 16.78, 1.839),
    ReportedDecode("jetson-agx-orin", "falcon3-10b", 13.25, 2.620),
)
"""Decode throughput and energy per token, batch 1 (CPU package power; Jetson module power)."""

HEADLINES: dict[str, tuple[float, float] | float] = {
    "gemm_latency_speedup": (5.6, 24.5),       # vs TL2 / T-MAC, abstract
    "gemv_throughput_speedup": (1.1, 86.2),    # abstract
    "memory_request_reduction_vs_tl2": (8.7, 13.8),  # section IV-C
    "energy_efficiency_vs_jetson": (2.5, 4.9),  # abstract
    "area_overhead_pct": 1.4,                  # section IV-E, Table II
    "power_overhead_pct": 3.2,                 # section IV-E, Table II
    "prefill_geomean_speedup_workstation": 8.8,  # section IV-B
    "prefill_geomean_speedup_laptop": 8.4,
    "prefill_geomean_speedup_mobile": 12.4,
    "decode_speedup_workstation_peak": 6.4,    # section IV-B
    "decode_speedup_laptop_mobile": (4.1, 4.2),
}
"""Headline results of the T-SAR paper (abstract and section IV), as reported."""
