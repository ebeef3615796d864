"""Instruction forms for the differential tests: Intel-syntax text for keystone, per mnemonic.

Register and memory conventions follow :mod:`tsar.sim.host_oracle`: memory operands are addressed
through ``rdx`` (a 256-byte window, ``rdx`` 64 bytes into it), GPR operands are ``eax``/``rax``
and ``ecx``/``rcx``.
"""

from __future__ import annotations

IMMS = (0x00, 0x1B, 0x4E, 0xB1, 0xE4, 0x39, 0xFF, 0x8D)
SHIFT_IMMS = (0, 1, 3, 7, 15, 16, 31, 33, 63, 64)


def _rrr(m: str, ymm: bool = True, xmm: bool = True) -> list[str]:
    out = []
    if ymm:
        out += [f"{m} ymm1, ymm2, ymm3", f"{m} ymm3, ymm3, ymm14", f"{m} ymm1, ymm2, ymmword ptr [rdx + 8]"]
    if xmm:
        out += [f"{m} xmm1, xmm2, xmm3", f"{m} xmm9, xmm2, xmmword ptr [rdx - 16]"]
    return out


def _rr(m: str, ymm: bool = True, xmm: bool = True) -> list[str]:
    out = []
    if ymm:
        out += [f"{m} ymm1, ymm2", f"{m} ymm2, ymm2", f"{m} ymm4, ymmword ptr [rdx + 3]"]
    if xmm:
        out += [f"{m} xmm1, xmm2", f"{m} xmm2, xmm2", f"{m} xmm12, xmmword ptr [rdx + 32]"]
    return out


def _imm_forms(template: str, imms=IMMS) -> list[str]:
    return [template.format(imm=i) for i in imms]


def forms() -> dict[str, list[str]]:
    """Mnemonic -> list of instruction texts covering its register, memory, width and imm forms."""
    f: dict[str, list[str]] = {}
    binary = []
    for s in "bwdq":
        binary += [f"vpadd{s}", f"vpsub{s}", f"vpcmpeq{s}", f"vpcmpgt{s}"]
    for s in "bwd":
        binary += [f"vpmins{s}", f"vpmaxs{s}", f"vpminu{s}", f"vpmaxu{s}", f"vpsign{s}"]
    for s in "bw":
        binary += [f"vpadds{s}", f"vpsubs{s}", f"vpaddus{s}", f"vpsubus{s}", f"vpavg{s}"]
    binary += ["vpmullw", "vpmulld", "vpmulhw", "vpmulhuw", "vpmulhrsw", "vpmuldq", "vpmuludq",
               "vpmaddwd", "vpmaddubsw", "vpsadbw", "vpand", "vpandn", "vpor", "vpxor",
               "vpsllvd", "vpsllvq", "vpsrlvd", "vpsrlvq", "vpsravd",
               "vpunpcklbw", "vpunpckhbw", "vpunpcklwd", "vpunpckhwd", "vpunpckldq", "vpunpckhdq",
               "vpunpcklqdq", "vpunpckhqdq", "vunpcklps", "vunpckhps", "vunpcklpd", "vunpckhpd",
               "vpacksswb", "vpackssdw", "vpackuswb", "vpackusdw",
               "vphaddw", "vphaddd", "vphsubw", "vphsubd", "vphaddsw", "vphsubsw", "vpshufb",
               "vandps", "vandnps", "vorps", "vxorps", "vandpd", "vandnpd", "vorpd", "vxorpd",
               "vaddps", "vsubps", "vmulps", "vdivps", "vmaxps", "vminps",
               "vaddpd", "vsubpd", "vmulpd", "vdivpd", "vmaxpd", "vminpd"]
    for m in binary:
        f[m] = _rrr(m)
    for m in ("vpermd", "vpermps"):
        f[m] = _rrr(m, xmm=False)
    for order in ("132", "213", "231"):
        for kind in ("fmadd", "fmsub", "fnmadd", "fnmsub"):
            m = f"v{kind}{order}ps"
            f[m] = _rrr(m)
    for m in ("vaddss", "vsubss", "vmulss", "vdivss", "vmaxss", "vminss",
              "vaddsd", "vsubsd", "vmulsd", "vdivsd", "vmaxsd", "vminsd"):
        size = "dword" if m.endswith("ss") else "qword"
        f[m] = [f"{m} xmm1, xmm2, xmm3", f"{m} xmm5, xmm6, {size} ptr [rdx + 4]"]
    for s in "bwd":
        f[f"vpabs{s}"] = _rr(f"vpabs{s}")
    for m in ("vcvtdq2ps", "vcvtps2dq", "vcvttps2dq", "vmovdqu", "vmovups", "vmovupd", "vlddqu",
              "vmovshdup", "vmovsldup"):
        f[m] = _rr(m) if m != "vlddqu" else [f"{m} ymm4, ymmword ptr [rdx + 3]",
                                            f"{m} xmm4, xmmword ptr [rdx + 5]"]
    for m in ("vmovdqa", "vmovaps", "vmovapd"):
        f[m] = [f"{m} ymm1, ymm2", f"{m} xmm1, xmm2", f"{m} ymm3, ymmword ptr [rdx]",
                f"{m} xmm3, xmmword ptr [rdx + 16]", f"{m} ymmword ptr [rdx + 32], ymm5",
                f"{m} xmmword ptr [rdx - 16], xmm6"]
    for m in ("vmovdqu", "vmovups"):
        f[m] += [f"{m} ymmword ptr [rdx + 7], ymm5", f"{m} xmmword ptr [rdx - 9], xmm6"]
    f["vmovntdq"] = ["vmovntdq ymmword ptr [rdx + 32], ymm5", "vmovntdq xmmword ptr [rdx], xmm2"]
    f["vmovntps"] = ["vmovntps ymmword ptr [rdx + 32], ymm5", "vmovntps xmmword ptr [rdx], xmm2"]
    f["vmovntpd"] = ["vmovntpd ymmword ptr [rdx], ymm5"]
    f["vmovntdqa"] = ["vmovntdqa ymm5, ymmword ptr [rdx + 32]", "vmovntdqa xmm2, xmmword ptr [rdx]"]
    for m in ("vpshufd", "vpshuflw", "vpshufhw", "vpermilps"):
        f[m] = _imm_forms(f"{m} ymm1, ymm2, {{imm}}") + _imm_forms(f"{m} xmm3, xmm4, {{imm}}")[:3] \
            + [f"{m} ymm5, ymmword ptr [rdx + 1], 0x93"]
    for m in ("vpslldq", "vpsrldq"):
        f[m] = [*_imm_forms(f"{m} ymm1, ymm2, {{imm}}", (0, 1, 3, 8, 15, 16, 200)), f"{m} xmm3, xmm4, 5"]
    for m in ("vpalignr", "vshufps", "vpblendw", "vpblendd", "vblendps", "vblendpd"):
        f[m] = [*_imm_forms(f"{m} ymm1, ymm2, ymm3, {{imm}}"), f"{m} xmm1, xmm2, xmm3, 0x35",
                f"{m} ymm1, ymm2, ymmword ptr [rdx + 4], 0x5c"]
    f["vpalignr"] += _imm_forms("vpalignr ymm1, ymm2, ymm3, {imm}", (1, 15, 16, 17, 31, 32, 40))
    for m in ("vpermq", "vpermpd"):
        f[m] = [*_imm_forms(f"{m} ymm1, ymm2, {{imm}}"), f"{m} ymm1, ymmword ptr [rdx], 0x4e"]
    for m in ("vperm2i128", "vperm2f128"):
        imms = (0x00, 0x01, 0x20, 0x31, 0x13, 0x08, 0x80, 0x88, 0x12)
        f[m] = [*_imm_forms(f"{m} ymm1, ymm2, ymm3, {{imm}}", imms),
                f"{m} ymm1, ymm2, ymmword ptr [rdx], 0x21"]
    for m in ("vpblendvb", "vblendvps", "vblendvpd"):
        f[m] = [f"{m} ymm1, ymm2, ymm3, ymm4", f"{m} xmm1, xmm2, xmm3, xmm4",
                f"{m} ymm1, ymm2, ymmword ptr [rdx], ymm7"]
    for s in "wdq":
        for kind in ("sll", "srl") + (("sra",) if s != "q" else ()):
            m = f"vp{kind}{s}"
            f[m] = [*_imm_forms(f"{m} ymm1, ymm2, {{imm}}", SHIFT_IMMS), f"{m} xmm1, xmm2, 5",
                    f"{m} ymm1, ymm2, xmm3", f"{m} xmm1, xmm2, xmm3", f"{m} ymm1, ymm2, xmmword ptr [rdx]"]
    for m in ("vextracti128", "vextractf128"):
        f[m] = [f"{m} xmm1, ymm2, 0", f"{m} xmm1, ymm2, 1", f"{m} xmm2, ymm2, 1", f"{m} xmm2, ymm2, 0",
                f"{m} xmmword ptr [rdx + 16], ymm3, 1"]
    for m in ("vinserti128", "vinsertf128"):
        f[m] = [f"{m} ymm1, ymm2, xmm3, 0", f"{m} ymm1, ymm2, xmm3, 1",
                f"{m} ymm1, ymm2, xmmword ptr [rdx + 8], 1"]
    for m, size in (("vpbroadcastb", "byte"), ("vpbroadcastw", "word"), ("vpbroadcastd", "dword"),
                    ("vpbroadcastq", "qword")):
        f[m] = [f"{m} ymm1, xmm2", f"{m} xmm1, xmm2", f"{m} ymm1, {size} ptr [rdx + 1]"]
    f["vbroadcastss"] = ["vbroadcastss ymm1, xmm2", "vbroadcastss xmm1, dword ptr [rdx]",
                         "vbroadcastss ymm1, dword ptr [rdx + 4]"]
    f["vbroadcastsd"] = ["vbroadcastsd ymm1, xmm2", "vbroadcastsd ymm1, qword ptr [rdx]"]
    f["vbroadcasti128"] = ["vbroadcasti128 ymm1, xmmword ptr [rdx + 16]"]
    f["vbroadcastf128"] = ["vbroadcastf128 ymm1, xmmword ptr [rdx + 16]"]
    f["vmovddup"] = ["vmovddup xmm1, xmm2", "vmovddup xmm1, qword ptr [rdx]", "vmovddup ymm1, ymm2",
                     "vmovddup ymm3, ymmword ptr [rdx + 8]"]
    f["vpermilps"] += ["vpermilps ymm1, ymm2, ymm3", "vpermilps xmm1, xmm2, xmm3",
                       "vpermilps ymm4, ymm5, ymmword ptr [rdx + 4]",
                       "vpermilps xmm4, xmm5, xmmword ptr [rdx]"]
    f["vpermilpd"] = [*_imm_forms("vpermilpd ymm1, ymm2, {imm}"), "vpermilpd xmm3, xmm4, 0x2",
                      "vpermilpd ymm5, ymmword ptr [rdx + 1], 0x9", "vpermilpd ymm1, ymm2, ymm3",
                      "vpermilpd xmm1, xmm2, xmm3", "vpermilpd ymm4, ymm5, ymmword ptr [rdx + 8]"]
    ratio = {"bw": 2, "bd": 4, "bq": 8, "wd": 2, "wq": 4, "dq": 2}
    sizes = {2: "xmmword", 4: "qword", 8: "dword"}
    for pair, r in ratio.items():
        for sign in ("sx", "zx"):
            m = f"vpmov{sign}{pair}"
            f[m] = [f"{m} ymm1, xmm2", f"{m} xmm1, xmm2", f"{m} ymm2, xmm2", f"{m} xmm7, xmm7",
                    f"{m} ymm1, {sizes[r]} ptr [rdx + 2]"]
    f["vpmovmskb"] = ["vpmovmskb eax, ymm2", "vpmovmskb ecx, xmm3"]
    f["vmovmskps"] = ["vmovmskps eax, ymm2", "vmovmskps ecx, xmm3"]
    f["vmovmskpd"] = ["vmovmskpd eax, ymm2"]
    f["vmovd"] = ["vmovd xmm1, eax", "vmovd eax, xmm2", "vmovd xmm3, dword ptr [rdx + 4]",
                  "vmovd dword ptr [rdx + 8], xmm4"]
    f["vmovq"] = ["vmovq xmm1, rax", "vmovq rcx, xmm2", "vmovq xmm3, qword ptr [rdx + 4]",
                  "vmovq qword ptr [rdx + 8], xmm4", "vmovq xmm5, xmm6"]
    f["vmovss"] = ["vmovss xmm1, dword ptr [rdx]", "vmovss dword ptr [rdx + 4], xmm2",
                   "vmovss xmm1, xmm2, xmm3"]
    f["vmovsd"] = ["vmovsd xmm1, qword ptr [rdx]", "vmovsd qword ptr [rdx + 4], xmm2",
                   "vmovsd xmm1, xmm2, xmm3"]
    for s, reg, size, imms in (("b", "eax", "byte", (0, 5, 15, 17)), ("w", "eax", "word", (0, 3, 7, 9)),
                               ("d", "eax", "dword", (0, 1, 3, 6)), ("q", "rax", "qword", (0, 1, 2))):
        f[f"vpextr{s}"] = [f"vpextr{s} {reg}, xmm2, {i}" for i in imms] + \
            [f"vpextr{s} {size} ptr [rdx + 3], xmm2, {imms[1]}"]
        f[f"vpinsr{s}"] = [f"vpinsr{s} xmm1, xmm2, {reg}, {i}" for i in imms] + \
            [f"vpinsr{s} xmm1, xmm2, {size} ptr [rdx + 3], {imms[1]}"]
    f["vmovlhps"] = ["vmovlhps xmm1, xmm2, xmm3"]
    f["vmovhlps"] = ["vmovhlps xmm1, xmm2, xmm3"]
    f["vptest"] = ["vptest ymm1, ymm2", "vptest xmm1, xmm2", "vptest ymm3, ymmword ptr [rdx]"]
    f["vpmaskmovd"] = ["vpmaskmovd ymm1, ymm2, ymmword ptr [rdx]", "vpmaskmovd xmm1, xmm2, xmmword ptr [rdx]",
                       "vpmaskmovd ymmword ptr [rdx + 4], ymm2, ymm3"]
    f["vpmaskmovq"] = ["vpmaskmovq ymm1, ymm2, ymmword ptr [rdx]",
                       "vpmaskmovq xmmword ptr [rdx + 4], xmm2, xmm3"]
    f["vmaskmovps"] = ["vmaskmovps ymm1, ymm2, ymmword ptr [rdx]", "vmaskmovps ymmword ptr [rdx], ymm2, ymm3"]
    f["vzeroupper"] = ["vzeroupper"]
    f["vzeroall"] = ["vzeroall"]
    return f


FLOAT_MNEMONICS_FINITE = ("vfmadd", "vfmsub", "vfnmadd", "vfnmsub")
"""Forms tested on finite float inputs only (NaN payload choice of FMA hardware is not modelled)."""
