"""The native engine (T-SAR sites rewritten into stubs, everything else on the host CPU) against
the Python engine: random register states through every T-SAR instruction form of every
configuration, the registers and flags the instructions do not write, the hand-written GEMV
strip, and generated BitLinear kernels; guest faults reported at the guest instruction."""

from __future__ import annotations

import iced_x86 as iced
import numpy as np
import pytest

from tsar.isa import configs
from tsar.isa.config import TsarConfig
from tsar.kernels.tsar_plan import TOKEN_BLOCKED, kernel_names
from tsar.paths import kernel_source
from tsar.sim import SimulationError, create_machine
from tsar.sim.vector_spill import HOST_AVX512, IMAGE_BYTES, byte_line, spill_lines

pytestmark = pytest.mark.native

def _forms(cfg: TsarConfig, rng: np.random.Generator) -> list[str]:
    """T-SAR instruction lines of ``cfg`` with register, base+disp, rsp (red zone) and RIP-relative
    operands, aliasing included, over every register the encoding addresses (zmm0..31 in EVEX
    form); memory operands read the buffer at rsi (or its copy)."""
    reg, n = cfg.register_class, cfg.addressable_registers
    g, w = cfg.group_regs, cfg.weight_regs
    groups = [b for b in range(0, n, g) if b + g <= n]
    red = max(96, cfg.weight_bytes)  # the operand inside the copied red zone
    lines = []
    for base in groups:
        src = int(rng.integers(0, n))
        lines += [f"{cfg.tlut_mnemonic} {reg}{base}, {reg}{src}",
                  f"{cfg.tlut_mnemonic} {reg}{base}, [rsi + {int(rng.integers(0, 64))}]",
                  f"{cfg.tlut_mnemonic} {reg}{base}, [rsi + rcx*2 + 8]"]
    for acc in range(n):
        lut = int(rng.choice(groups))
        wreg = int(rng.integers(0, n - w + 1)) // w * w
        lines += [f"{cfg.tgemv_mnemonic} {reg}{acc}, {reg}{lut}, {reg}{wreg}",
                  f"{cfg.tgemv_mnemonic} {reg}{acc}, {reg}{lut}, [rsi + {int(rng.integers(0, 64))}]"]
    lines += [f"{cfg.tlut_mnemonic} {reg}{groups[-1]}, [rsp - {red}]",
              f"{cfg.tgemv_mnemonic} {reg}0, {reg}{groups[-1]}, [rsp - {red}]",
              f"{cfg.tlut_mnemonic} {reg}{groups[0]}, [rip + data]",
              f"{cfg.tgemv_mnemonic} {reg}1, {reg}{groups[0]}, [rip + data]"]
    return lines


def _program(lines: list[str], evex: bool) -> str:
    """f(image, buffer): registers from image (:mod:`tsar.sim.vector_spill`'s layout: zmm0..31 and
    k0..7 when ``evex``, else ymm0..15), the red zone from buffer, the lines, registers and RFLAGS /
    GPRs back to image (offsets IMAGE_BYTES: rflags, IMAGE_BYTES + 8..: rax rbx rcx rdx r8..r11)."""
    store, load = spill_lines("rdi", avx512=evex)
    copy = "\n".join(f"mov rax, qword ptr [rsi + {8 * i}]\nmov qword ptr [rsp - {128 - 8 * i}], rax"
                     for i in range(16))
    save = "\n".join(f"mov qword ptr [rdi + {IMAGE_BYTES + 8 + 8 * i}], {r}" for i, r in
                     enumerate(("rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11")))
    return f"""
f:
{copy}
{chr(10).join(load)}
mov rax, 0x1111
mov rbx, 0x2222
mov rcx, 3
mov rdx, 0x4444
mov r8, 0x8888
mov r9, 0x9999
mov r10, 0xaaaa
mov r11, 0xbbbb
cmp rax, 0x1112
{chr(10).join(lines)}
pushfq
pop qword ptr [rdi + {IMAGE_BYTES}]
{save}
{chr(10).join(store)}
ret
data:
.byte {", ".join(str(i * 37 % 256) for i in range(128))}
"""


def _run(engine: str, source: str, image: np.ndarray, buffer: np.ndarray, **options) -> np.ndarray:
    m = create_machine(engine, **options)
    m.load_asm(source)
    out = image.copy()
    m.call("f", out, buffer, returns="none")
    return out


def _needs_host(cfg: TsarConfig) -> None:
    """Skip a 512-bit configuration on a host without AVX-512 (its zmm registers cannot live there)."""
    if cfg.encoding == "evex" and not HOST_AVX512:
        pytest.skip(f"{cfg.name} needs AVX-512 F/BW on the host (test_wide_configurations_are_"
                    "refused_without_avx512 covers the refusal)")


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_every_form_matches_the_python_engine(cfg: TsarConfig):
    _needs_host(cfg)
    rng = np.random.default_rng(sum(map(ord, cfg.name)))
    source = _program(_forms(cfg, rng), cfg.encoding == "evex")
    for trial in range(4):
        image = np.zeros(IMAGE_BYTES + 8 + 64, np.uint8)
        image[:IMAGE_BYTES] = rng.integers(0, 256, IMAGE_BYTES)
        if trial == 1:  # int8 extremes and all-ones weight bytes: wrap-around paths
            image[:IMAGE_BYTES] = rng.choice(np.array([0x7F, 0x80, 0xFF, 0x01], np.uint8), IMAGE_BYTES)
        buffer = rng.integers(0, 256, 512).astype(np.uint8)
        want = _run("python", source, image, buffer)
        got = _run("native", source, image, buffer, in_process=True)
        assert np.array_equal(got, want), np.flatnonzero(got != want)[:16]


@pytest.mark.parametrize("cfg", [c for c in configs() if c.encoding == "evex"], ids=lambda c: c.name)
def test_wide_configurations_are_refused_without_avx512(cfg: TsarConfig, monkeypatch):
    """A host without AVX-512 has no zmm registers for a 512-bit configuration: one-line refusal
    when the code is loaded (the helpers themselves are AVX2: test_tsar_native runs them)."""
    import tsar.sim.native_engine.machine as native

    monkeypatch.setattr(native, "HOST_AVX512", False)
    m = create_machine("native", in_process=True)
    with pytest.raises(SimulationError, match=f"ud: {cfg.name} is a 512-bit .* lacks AVX-512 F/BW.*"
                                              f"\\({cfg.tlut_mnemonic} zmm4"):
        m.load_asm(f"f:\nnop\n{cfg.tlut_mnemonic} zmm4, [rdi]\nret\n")


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_shortest_sites_hold_the_jump(cfg: TsarConfig):
    """The shortest form of each instruction (register operands: prefix, opcode, ModRM; 5 bytes in
    VEX form, 6 in EVEX) takes the ``jmp rel32`` and int3 padding in exactly its bytes."""
    from tsar.isa import codec
    from tsar.isa.operands import Register
    from tsar.sim.native_engine.rewrite import JMP_REL32, MIN_SITE, Site, patch

    assert MIN_SITE >= JMP_REL32
    reg = cfg.register_class
    inst = codec.make(cfg.tlut_mnemonic, Register(reg, 0), Register(reg, 1))
    data = codec.encode(inst)
    assert len(data) == codec.PREFIX_BYTES[cfg.encoding] + 2 >= MIN_SITE
    site = Site(0x1000, len(data), inst, str(inst))
    assert patch(site, 0x2000) == b"\xe9" + (0x2000 - 0x1005).to_bytes(4, "little") + \
        b"\xcc" * (len(data) - JMP_REL32)


def test_worker_and_in_process_agree_with_numpy_on_the_gemv_strip():
    from tsar.isa import C2S4, pack_tile

    rng = np.random.default_rng(1)
    k = 2560
    act = rng.integers(-127, 128, k).astype(np.int8)
    tile = rng.integers(-1, 2, (16, k))
    weights = pack_tile(C2S4, tile.reshape(16, k // 8, 8).transpose(1, 0, 2)).reshape(-1)
    for options in ({}, {"in_process": True}):
        m = create_machine("native", **options)
        m.load_asm(kernel_source("gemv16_c2s4.s").read_text(), filename="gemv16_c2s4.s")
        out = np.zeros(16, np.int32)
        m.call("gemv16_c2s4", act, weights, out, k)
        assert (out == tile @ act.astype(np.int64)).all()
        assert m.stats.tsar_instructions == k // 4  # one TLUT and one TGEMV per 8 columns


@pytest.mark.parametrize("kernel", kernel_names())
def test_bitlinear_kernels_bit_exact(kernel: str):
    from tsar.simulate.tsar_kernel import plan_for, simulate

    rng = np.random.default_rng(2)
    plan = plan_for(kernel, 64, 512)
    w = rng.integers(-1, 2, (64, 512)).astype(np.int8)
    for n, x in ((1, rng.standard_normal((1, 512))), (3, rng.standard_normal((3, 512)) * 50)):
        x = x.astype(np.float32)
        native = simulate(plan, x, w, 0.5, machine=create_machine("native"), memory_stats=False)
        python = simulate(plan, x, w, 0.5, memory_stats=False)
        assert native.exact and np.array_equal(native.y.view(np.uint32), python.y.view(np.uint32)), n
    ones = np.ones((64, 512), np.int8)
    x = np.full((2, 512), 127.0, np.float32)
    assert simulate(plan, x, ones, 1.0, machine=create_machine("native"), memory_stats=False).exact


def test_guest_faults_name_the_instruction():
    m = create_machine("native")
    m.load_asm("""
    scalar:
        mov rax, 8
        mov eax, dword ptr [rax]
        ret
    tsar:
        xor edi, edi
        tlut2x4 ymm0, qword ptr [rdi + 16]
        ret
    good:
        mov eax, 7
        ret
    """)
    scalar = r"memory: SIGSEGV accessing 0x8 .*\(mov eax, dword ptr \[rax\]\)"
    with pytest.raises(SimulationError, match=scalar):
        m.call("scalar")
    tsar = r"SIGSEGV accessing 0x10 .*\(tlut2x4 ymm0, qword ptr \[rdi\+0x10\]\)"
    with pytest.raises(SimulationError, match=tsar):
        m.call("tsar")
    assert m.call("good") == 7  # a new worker after the fault


def test_unknown_engine_is_a_one_line_error():
    with pytest.raises(SimulationError, match="unknown engine 'qemu'"):
        create_machine("qemu")


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_tlut_tgemv_equal_the_ternary_product_natively(cfg: TsarConfig):
    """The ISA property (TGEMV over TLUT's group == W @ a) through the rewritten stubs."""
    from tsar.isa.semantics import pack_tile, tile_matvec

    _needs_host(cfg)
    reg, top = cfg.register_class, cfg.addressable_registers - 1
    g = cfg.group_regs
    acc = top if top >= 2 * g else 0  # the highest register (zmm31 in EVEX form) when it is free
    clear, store = f"vpxor {reg}{acc}, {reg}{acc}, {reg}{acc}", f"vmovdqu [rdx], {reg}{acc}"
    if cfg.encoding == "evex":  # the assembler has no EVEX: iced-x86 bytes
        z = iced.Register.ZMM0 + acc
        clear = byte_line(iced.Instruction.create_reg_reg_reg(iced.Code.EVEX_VPXORD_ZMM_K1Z_ZMM_ZMMM512B32,
                                                              z, z, z))
        store = byte_line(iced.Instruction.create_mem_reg(iced.Code.EVEX_VMOVDQU64_ZMMM512_K1Z_ZMM,
                                                          iced.MemoryOperand(iced.Register.RDX), z))
    source = f"""
    f:                           ; f(act, weights, out): out = TGEMV(0, TLUT(act), weights)
        {clear}
        {cfg.tlut_mnemonic} {reg}{g}, [rdi]
        {cfg.tgemv_mnemonic} {reg}{acc}, {reg}{g}, [rsi]
        {store}
        vzeroupper
        ret
    """
    rng = np.random.default_rng(7)
    m = create_machine("native")
    m.load_asm(source)
    for trial in range(40):
        tile = rng.integers(-1, 2, (cfg.m, cfg.k)).astype(np.int8)
        act = rng.integers(-128, 128, cfg.k).astype(np.int8)
        if trial == 0:
            tile[:] = 1
            act[:] = -128
        out = np.zeros(cfg.register_bytes, np.uint8)
        m.call("f", act, pack_tile(cfg, tile).reshape(-1), out, returns="none")
        got = out.view(np.int16)[:cfg.m]
        assert np.array_equal(got, tile_matvec(cfg, tile, act).astype(np.int16)), trial


@pytest.mark.parametrize("name", ["bitnet-b1.58-2b-4t", pytest.param("llama3-8b", marks=pytest.mark.slow)])
def test_whole_model_layers_bit_exact(name: str):
    from tsar.simulate.model import run_model

    run = run_model(name, 2, kernel="tsar-c2s4-op", layers=1, progress=False)
    assert not run.mismatched_layers and sum(run.calls.values()) == 5


def test_model_run_errors_are_one_line(tmp_path):
    from tsar.errors import UserError
    from tsar.simulate.model import run_model

    with pytest.raises(UserError, match="unknown model 'gpt5'"):
        run_model("gpt5")
    bad = tmp_path / "w.npz"
    np.savez(bad, **{"0.qkv": np.full((3, 3), 2, np.int8)})
    with pytest.raises(UserError, match=r"weights '0.qkv' must be ternary int8 of shape \(3840, 2560\)"):
        run_model("bitnet-b1.58-2b-4t", weights=str(bad), layers=1, progress=False)
    with pytest.raises(UserError, match="--tokens must be at least 1"):
        run_model("bitnet-b1.58-2b-4t", 0)


@pytest.mark.parametrize("flow", ["op-tokens", pytest.param("ap-tokens", marks=pytest.mark.slow)])
@pytest.mark.parametrize("config", ["c2s4", "c4s4"])
def test_token_blocked_gemm_at_prefill_sizes(config: str, flow: str):
    """The GEMM dataflows at N = 8, 32 and 128 on a BitNet-2B-sized layer, random and adversarial."""
    from tsar.simulate.tsar_kernel import plan_for, simulate

    plan = plan_for(f"tsar-{config}-{flow}", 2560, 2560)
    rng = np.random.default_rng(3)
    w = rng.integers(-1, 2, (2560, 2560)).astype(np.int8)
    for n in (8, 32, 128):
        x = rng.standard_normal((n, 2560)).astype(np.float32)
        assert simulate(plan, x, w, 0.5, machine=create_machine("native"), memory_stats=False).exact
    x = np.where(rng.random((32, 2560)) < 0.5, 4.0, -4.0).astype(np.float32)
    run = simulate(plan, x, np.ones((2560, 2560), np.int8), 1.0, machine=create_machine("native"),
                   memory_stats=False)
    assert run.exact


@pytest.mark.parametrize("flow", TOKEN_BLOCKED)
@pytest.mark.parametrize("config", ["c2s4", "c4s4"])
def test_token_blocked_gemm_ci_sizes(config: str, flow: str):
    """The GEMM dataflows at N = 8, 32 and 128 on 33 tiles (an ap-tokens tile block and a remainder)
    x K = 512 (two int16 windows): random, then all weights +1 or -1 with every activation at
    +-127."""
    from tsar.simulate.tsar_kernel import plan_for, simulate

    m, k = 16 * 33, 512
    plan = plan_for(f"tsar-{config}-{flow}", m, k)
    machine = create_machine("native")
    for n, sign in ((8, 1), (32, -1), (128, 1)):
        rng = np.random.default_rng(n)
        x = (rng.standard_normal((n, k)) * rng.uniform(0.1, 10, (n, 1))).astype(np.float32)
        w = rng.integers(-1, 2, (m, k)).astype(np.int8)
        assert simulate(plan, x, w, 0.5, machine=machine, memory_stats=False).exact
        signs = np.where(rng.random((n, 1)) < 0.5, 1.0, -1.0)
        x = np.broadcast_to(signs, (n, k)).astype(np.float32)
        run = simulate(plan, x, np.full((m, k), sign, np.int8), 1.0, machine=machine, memory_stats=False)
        assert run.exact and np.allclose(run.y, sign * signs * k), n
