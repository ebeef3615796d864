"""The one table of native baseline kernels: every list of kernels (bench, the native library's
dispatch ids, the simulator build, the packers, compare and validation) is read from here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

from tsar.kernels.formats import dense, i2s, int2_vnni, iq1_bn, iq2_bn, tl1, tl2, tq1_0, tq2_0, trit5


@dataclass(frozen=True)
class NativeKernelSpec:
    """One native baseline kernel.

    ``packer``: the format module whose ``pack(w_t, **options)`` lays out the weights;
    ``lib_id``: the name of its id in the native library (``TSAR_TL2``); ``blocked``: takes
    ``bm``/``bk`` block sizes and a work-size query; ``prepared``: prepares each token's activations
    into scratch, so its simulator GEMV takes work of ``tsar_sim_<name>_work_size()`` bytes as the
    blocked kernels' does; ``aux``: reads per-row weight sums (``tsar_weights.aux``, the packed
    format's ``aux``; dense), so its simulator entries take the whole weight descriptor, ``(w, aux,
    m, k, bm, bk, ...)`` (``TSAR_SIM_PREP_AUX`` in ``native/common.h``);
    ``simulated``: has entry points in the simulator library (``tsar_sim_<name>_gemv``, ...);
    ``modelled``: a simulated kernel that ``tsar compare`` and ``tsar validate-model`` model as a
    baseline (the public formats and dense are simulated and checked but not modelled);
    ``source``: the stem of its C
    source ``native/<source>.c`` (default ``name``; files of two kernels share one); ``overread``:
    bytes its loads may reach past the packed weights (the buffer must be padded that much);
    ``compared``: measured by ``tsar compare`` beside T-SAR. ``sim_isas``: the ISA levels of
    :data:`SIM_ISAS` whose rows function the simulator library exposes (``avx2``: the entries
    above; another level ``isa``: the same entries named ``tsar_sim_<name>_<isa>_...``);
    ``level_flags``: CPU flags a level's rows need beyond :data:`SIM_ISAS` (trit5's ``avx512`` rows
    use VBMI lookups: ``avx512vbmi``), checked by :func:`runs_build`.
    """

    name: str
    description: str
    packer: ModuleType
    lib_id: str
    blocked: bool = False
    prepared: bool = False
    aux: bool = False
    simulated: bool = False
    modelled: bool = True
    source: str = ""
    overread: int = 0
    compared: bool = True
    sim_isas: tuple[str, ...] = ("avx2",)
    level_flags: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def c_source(self) -> str:
        """File name of the kernel's C source in ``native/``."""
        return f"{self.source or self.name}.c"

    @property
    def gemv_work(self) -> bool:
        """Whether the simulator GEMV entry takes work (LUT tables or prepared activations)."""
        return self.blocked or self.prepared


_PUBLIC = {"prepared": True, "simulated": True, "modelled": False, "sim_isas": ("avx2", "avxvnni")}
"""The public ternary formats (tq.c, iqbn.c): activations prepared per token; simulated, not modelled yet."""

NATIVE_KERNELS: dict[str, NativeKernelSpec] = {spec.name: spec for spec in (
    NativeKernelSpec("tl2", "bitnet.cpp TL2 (3-weight sign/magnitude index, pshufb tables)", tl2, "TSAR_TL2",
                     blocked=True, simulated=True),
    NativeKernelSpec("tl1", "bitnet.cpp TL1 (2-weight index, pshufb tables)", tl1, "TSAR_TL1", blocked=True,
                     simulated=True),
    NativeKernelSpec("i2s", "bitnet.cpp I2_S (2-bit, pmaddubsw / vpdpbusd)", i2s, "TSAR_I2S", simulated=True,
                     sim_isas=("avx2", "avxvnni", "avx512")),
    NativeKernelSpec("dense", "int8 weights (pmaddubsw / vpdpbusd)", dense, "TSAR_DENSE", prepared=True,
                     aux=True, simulated=True, modelled=False, sim_isas=("avx2", "avxvnni", "avx512")),
    NativeKernelSpec("int2", "Intel 2-bit up-convert (pmaddubsw / vpdpbusd)", int2_vnni, "TSAR_INT2",
                     simulated=True, sim_isas=("avx2", "avxvnni", "avx512")),
    NativeKernelSpec("trit5", "5 trits per byte (VBMI lookups + vpdpbusd, AVX2 decode)", trit5, "TSAR_TRIT5",
                     prepared=True, simulated=True, sim_isas=("avx2", "avxvnni", "avx512"),
                     level_flags=(("avx512", ("avx512vbmi",)),)),
    NativeKernelSpec("tq1_0", "llama.cpp TQ1_0 (base-3, 5 trits per byte, 1.69 b/w)", tq1_0, "TSAR_TQ1_0",
                     **_PUBLIC, source="tq", overread=10),
    NativeKernelSpec("tq2_0", "llama.cpp TQ2_0 (2-bit, 256-weight blocks, 2.06 b/w)", tq2_0, "TSAR_TQ2_0",
                     **_PUBLIC, source="tq"),
    NativeKernelSpec("iq1_bn", "ik_llama.cpp IQ1_BN (base-3, 13-byte blocks, 1.63 b/w)", iq1_bn,
                     "TSAR_IQ1_BN", **_PUBLIC, source="iqbn", overread=16),
    NativeKernelSpec("iq2_bn", "ik_llama.cpp IQ2_BN (2-bit, 64-weight blocks, 2.0 b/w)", iq2_bn,
                     "TSAR_IQ2_BN", **_PUBLIC, source="iqbn", overread=16),
)}
"""Every native kernel, in the order tables list them."""

SIM_ISAS: dict[str, tuple[str, ...]] = {
    "avx2": ("avx2", "fma"),
    "avxvnni": ("avx2", "avx_vnni"),
    "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512_vnni"),
}
"""ISA levels of the simulator library's rows functions -> the CPU flags (``/proc/cpuinfo``) that
running one natively needs (``AVX512_TARGET`` in ``native/common.h``)."""


def runs_level(isa: str, flags: Iterable[str]) -> bool:
    """Whether a CPU (or platform) with ``flags`` runs the ISA level ``isa`` of :data:`SIM_ISAS`."""
    return set(SIM_ISAS[isa]) <= set(flags)


def runs_build(name: str, isa: str, flags: Iterable[str]) -> bool:
    """Whether a CPU (or platform) with ``flags`` runs kernel ``name``'s rows at level ``isa``: the
    level's flags and the kernel's own (``level_flags``)."""
    extra = dict(NATIVE_KERNELS[name].level_flags).get(isa, ())
    return runs_level(isa, flags) and set(extra) <= set(flags)


def native_label(name: str, isa: str = "avx2") -> str:
    """How a native kernel at an ISA level is named in comparisons and validation: the name for
    its AVX2 build, ``name-<isa>`` for another (``int2-avx512``, ``int2-avxvnni``)."""
    return name if isa == "avx2" else f"{name}-{isa}"


def split_native_label(label: str) -> tuple[str, str]:
    """``(name, isa)`` of a :func:`native_label`; KeyError for a kernel or level the simulator
    library does not build."""
    name, _, isa = label.partition("-")
    isa = isa or "avx2"
    if name not in NATIVE_KERNELS or isa not in NATIVE_KERNELS[name].sim_isas:
        raise KeyError(f"no simulator build of native kernel {label!r}")
    return name, isa


def sim_entry(name: str, isa: str = "avx2") -> str:
    """The stem of a kernel's simulator entry points at ``isa`` (``tsar_sim_<stem>_gemv``)."""
    if isa not in NATIVE_KERNELS[name].sim_isas:
        raise KeyError(f"{name} has no {isa} rows in the simulator library "
                       f"(it has: {', '.join(NATIVE_KERNELS[name].sim_isas)})")
    return name if isa == "avx2" else f"{name}_{isa}"


KERNELS = tuple(NATIVE_KERNELS)
SIM_LIBRARY = tuple(name for name, spec in NATIVE_KERNELS.items() if spec.simulated)
"""Every kernel with entry points in the simulator library."""
SIMULATED = tuple(name for name in SIM_LIBRARY if NATIVE_KERNELS[name].modelled)
"""The simulated baselines that compare and validate-model model on other platforms."""
SIMULATED_VARIANTS = tuple(native_label(name, isa) for name in SIMULATED
                           for isa in NATIVE_KERNELS[name].sim_isas if isa != "avx2")
"""Their builds at other ISA levels (``int2-avxvnni``, ``int2-avx512``): modelled where a
platform's cores execute the level, measured where the host does."""
SIMULATED_PUBLIC = tuple(name for name in SIM_LIBRARY if not NATIVE_KERNELS[name].modelled)
"""The simulated kernels that are not modelled as baselines (yet): the public ternary formats, dense
and trit5: simulated (exact, counted) and checked."""
SIMULATED_PUBLIC_VARIANTS = tuple(native_label(name, isa) for name in SIMULATED_PUBLIC
                                  for isa in NATIVE_KERNELS[name].sim_isas if isa != "avx2")
"""Their builds at other ISA levels (simulated and checked, not modelled)."""
COMPARED = tuple(name for name, spec in NATIVE_KERNELS.items() if spec.compared)
