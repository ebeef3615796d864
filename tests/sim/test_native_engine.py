"""The native engine (T-SAR sites rewritten into stubs, everything else on the host CPU) against
the Python engine: random register states through every T-SAR instruction form of every
configuration, the registers and flags the instructions do not write, the hand-written GEMV
strip, and generated BitLinear kernels; guest faults reported at the guest instruction."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.isa import configs
from tsar.isa.config import TsarConfig
from tsar.kernels.tsar_plan import TOKEN_BLOCKED, kernel_names
from tsar.paths import kernel_source
from tsar.sim import SimulationError, create_machine

pytestmark = pytest.mark.native

LOAD = "\n".join(f"vmovdqu ymm{i}, ymmword ptr [rdi + {32 * i}]" for i in range(16))
STORE = "\n".join(f"vmovdqu ymmword ptr [rdi + {32 * i}], ymm{i}" for i in range(16))


def _forms(cfg: TsarConfig, rng: np.random.Generator) -> list[str]:
    """T-SAR instruction lines of ``cfg`` with register, base+disp, rsp (red zone) and RIP-relative
    operands, aliasing included; memory operands read the buffer at rsi (or its copy)."""
    reg = "ymm" if cfg.vector_bits == 256 else "xmm"
    g, w = cfg.group_regs, cfg.weight_regs
    groups = [b for b in range(0, 16, g) if b + g <= 16]
    lines = []
    for base in groups:
        src = int(rng.integers(0, 16))
        lines += [f"{cfg.tlut_mnemonic} {reg}{base}, {reg}{src}",
                  f"{cfg.tlut_mnemonic} {reg}{base}, [rsi + {int(rng.integers(0, 64))}]",
                  f"{cfg.tlut_mnemonic} {reg}{base}, [rsi + rcx*2 + 8]"]
    for acc in range(16):
        lut = int(rng.choice(groups))
        wreg = int(rng.integers(0, 16 - w + 1)) // w * w
        lines += [f"{cfg.tgemv_mnemonic} {reg}{acc}, {reg}{lut}, {reg}{wreg}",
                  f"{cfg.tgemv_mnemonic} {reg}{acc}, {reg}{lut}, [rsi + {int(rng.integers(0, 64))}]"]
    lines += [f"{cfg.tlut_mnemonic} {reg}{groups[-1]}, [rsp - 96]",
              f"{cfg.tgemv_mnemonic} {reg}0, {reg}{groups[-1]}, [rsp - 96]",
              f"{cfg.tlut_mnemonic} {reg}{groups[0]}, [rip + data]",
              f"{cfg.tgemv_mnemonic} {reg}1, {reg}{groups[0]}, [rip + data]"]
    return lines


def _program(lines: list[str]) -> str:
    """f(image, buffer): registers from image, the red zone from buffer, the lines, registers
    and RFLAGS / GPRs back to image (offsets 512: rflags, 520..: rax rbx rcx rdx rsi rdi r8..r11)."""
    copy = "\n".join(f"mov rax, qword ptr [rsi + {8 * i}]\nmov qword ptr [rsp - {128 - 8 * i}], rax"
                     for i in range(16))
    save = "\n".join(f"mov qword ptr [rdi + {520 + 8 * i}], {r}" for i, r in
                     enumerate(("rax", "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11")))
    return f"""
f:
{copy}
{LOAD}
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
pop qword ptr [rdi + 512]
{save}
{STORE}
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


@pytest.mark.parametrize("cfg", configs(), ids=lambda c: c.name)
def test_every_form_matches_the_python_engine(cfg: TsarConfig):
    rng = np.random.default_rng(hash(cfg.name) % 2**32)
    source = _program(_forms(cfg, rng))
    for trial in range(4):
        image = np.zeros(512 + 8 + 64, np.uint8)
        image[:512] = rng.integers(0, 256, 512)
        if trial == 1:  # int8 extremes and all-ones weight bytes: wrap-around paths
            image[:512] = rng.choice(np.array([0x7F, 0x80, 0xFF, 0x01], np.uint8), 512)
        buffer = rng.integers(0, 256, 512).astype(np.uint8)
        want = _run("python", source, image, buffer)
        got = _run("native", source, image, buffer, in_process=True)
        assert np.array_equal(got, want), np.flatnonzero(got != want)[:16]


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

    reg = "ymm" if cfg.vector_bits == 256 else "xmm"
    g = cfg.group_regs
    source = f"""
    f:                           ; f(act, weights, out): out = TGEMV(0, TLUT(act), weights)
        vpxor {reg}0, {reg}0, {reg}0
        {cfg.tlut_mnemonic} {reg}{g}, [rdi]
        {cfg.tgemv_mnemonic} {reg}0, {reg}{g}, [rsi]
        vmovdqu [rdx], {reg}0
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
