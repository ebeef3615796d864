; gemv16_c2s4: one 16-row strip of a ternary GEMV with TLUT2x4 + TGEMV8x16.
;
; System V arguments:
;   rdi  const int8_t  *act       k int8 activations
;   rsi  const uint8_t *weights   k/8 TGEMV weight operands of 32 bytes (one 16 x 8 tile each),
;                                 in K order, as tsar.isa.pack_tile packs them
;   rdx  int32_t       *out       16 int32 results (out[j] = sum_i W[j, i] * act[i])
;   rcx  uint64_t       k         number of activations, a multiple of 8
;
; The int16 accumulator ymm0 takes at most 32 TGEMVs (32 * 8 * 127 = 32512 <= 32767) before it
; is widened into the int32 accumulators ymm2 (outputs 0..7) and ymm3 (outputs 8..15).

gemv16_c2s4:
    vpxor ymm2, ymm2, ymm2
    vpxor ymm3, ymm3, ymm3
    shr rcx, 3                          ; number of 16 x 8 tiles
    jz done
outer:
    mov r8, 32                          ; TGEMVs in this int16 chunk: min(32, tiles left)
    cmp rcx, r8
    cmovb r8, rcx
    sub rcx, r8
    vpxor ymm0, ymm0, ymm0
inner:
    tlut2x4 ymm8, qword ptr [rdi]       ; 4 D/S table pairs -> ymm8..ymm9
    tgemv8x16 ymm0, ymm8, ymmword ptr [rsi]
    add rdi, 8
    add rsi, 32
    dec r8
    jnz inner
    vpmovsxwd ymm4, xmm0                ; widen int16 -> int32 and accumulate
    vextracti128 xmm5, ymm0, 1
    vpmovsxwd ymm5, xmm5
    vpaddd ymm2, ymm2, ymm4
    vpaddd ymm3, ymm3, ymm5
    test rcx, rcx
    jnz outer
done:
    vmovdqu ymmword ptr [rdx], ymm2
    vmovdqu ymmword ptr [rdx + 32], ymm3
    vzeroupper
    ret
