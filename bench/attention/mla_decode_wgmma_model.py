# Index-mapping emulation of src/cuda/attention/mla_decode_wgmma.cu (numpy, < 1 s):
# the cp.async stage stores, the q hi/lo stores, wgmma's shared-memory descriptors
# (K-major, 64-byte swizzle applied to address bits 4-5 from bits 7-8, 8-row groups
# 512 bytes apart, k-steps as +32-byte start offsets), the accumulator layout
# (CUTLASS CLayout_64xN) and the register A layout for 8-bit types (ALayout_64x32),
# ldmatrix.trans + the byte permutes of the V^T fragments, the token order of the
# P^T words and the output dims. Values are random bytes treated as integers, so
# every check is exact; it checks the index mapping, not the CUDA code or numerics.
# Run: .venv/bin/python bench/attention/mla_decode_wgmma_model.py
import numpy as np
rng = np.random.default_rng(1)
SMEM = 90000
def sw64(row, chunk): return row*64 + (((chunk ^ (row >> 1)) & 3) << 4)
def swz_hw(a): return a ^ (((a >> 7) & 3) << 4)   # Swizzle<2,4,3> on byte addresses
def desc_read(smem, start, rows, sbo=512):
    # K-major operand of `rows` x 32 bytes for one k32 step
    out = np.zeros((rows, 32), np.int64)
    for m in range(rows):
        for k in range(32):
            a = start + (m // 8) * sbo + (m % 8) * 64 + k
            out[m, k] = smem[swz_hw(a)]
    return out
def prmt(a, b, sel):
    by = [(a >> (8*i)) & 255 for i in range(4)] + [(b >> (8*i)) & 255 for i in range(4)]
    return sum(by[(sel >> (4*i)) & 7] << (8*i) for i in range(4))
def byte(x, i): return (x >> (8*i)) & 255

base = 1024
kSlab, kStage, kQSlab = 4096, 9*4096, 1024
kOffQ = 2*kStage; kOffP = kOffQ + 9*kQSlab
smem = np.zeros(SMEM, np.int64)
st = 1
stage = base + st*kStage
K = rng.integers(0, 256, (64, 576))           # tile bytes [token][dim]
# load_tile v2: thread (r8=tid/8, sub=tid%8), rows 16ps+r8, chunks sub+8j, rope 32+sub
for tid in range(128):
    r8, sub = tid >> 3, tid & 7
    lane_off = r8*64 + ((((sub & 3) ^ (r8 >> 1)) & 3) << 4) + (sub >> 2)*kSlab
    for ps in range(4):
        row = 16*ps + r8
        dst = stage + ps*1024 + lane_off
        for j in range(4):
            c = sub + 8*j; d = dst + 2*j*kSlab
            smem[d:d+16] = K[row, 16*c:16*c+16]
        if sub < 4:
            c = 32 + sub; d = dst + 8*kSlab
            smem[d:d+16] = K[row, 16*c:16*c+16]
# Q hi/lo rows: 16 rows x 576 bytes
Q = rng.integers(0, 256, (16, 576))
for h in range(16):
    for grp in range(144):
        d = 4*grp; slab, chunk, within = d >> 6, (d >> 4) & 3, d & 15
        a = base + kOffQ + slab*kQSlab + sw64(h, chunk) + within
        smem[a:a+4] = Q[h, d:d+4]
# ---- scores: 18 k-steps of m64n16k32 ----
S = np.zeros((64, 16), np.int64)
for ks in range(18):
    A = desc_read(smem, stage + (ks >> 1)*kSlab + (ks & 1)*32, 64)
    B = desc_read(smem, base + kOffQ + (ks >> 1)*kQSlab + (ks & 1)*32, 16)
    S += A @ B.T
assert (S == K @ Q.T).all(), "scores mapping"
# D fragment -> thread values s(r, hh) = d[2r+hh] + d[4+2r+hh]
def cfrag(D, warp, lane, N):   # CLayout_64xN: reg -> (m, n)
    g, q4 = lane >> 2, lane & 3
    vals = {}
    for reg in range(N // 2):
        v0, v1, v2 = reg % 2, (reg // 2) % 2, reg // 4
        vals[reg] = D[16*warp + g + 8*v1, 2*q4 + v0 + 8*v2]
    return vals
for warp in range(4):
    for lane in range(32):
        g, q4 = lane >> 2, lane & 3
        d = cfrag(S, warp, lane, 16)
        for r in range(2):
            for hh in range(2):
                tok, head = 16*warp + g + 8*r, 2*q4 + hh
                assert d[2*r+hh] + d[4+2*r+hh] == S[tok, head] + S[tok, 8+head]
print("scores: descriptors, swizzle and D fragment OK")
# ---- P^T words ----
Phi = rng.integers(0, 256, (64, 8)); Plo = rng.integers(0, 256, (64, 8))   # [token][head]
pk = {}
for warp in range(4):
    for lane in range(32):
        g, q4 = lane >> 2, lane & 3
        pk[warp, lane] = []
        for hh in range(2):
            h = 2*q4 + hh; t0, t1 = 16*warp + g, 16*warp + g + 8
            pk[warp, lane].append(Phi[t0, h] | Phi[t1, h] << 8 | Plo[t0, h] << 16 | Plo[t1, h] << 24)
for warp in range(4):
    for lane in range(32):
        g, q4 = lane >> 2, lane & 3
        odd = g & 1
        mine = pk[warp, lane][1] if odd else pk[warp, lane][0]
        other = pk[warp, lane ^ 4][0] if (g ^ 1) & 1 else pk[warp, lane ^ 4][1]  # partner sends odd?pk0:pk1
        hi = prmt(mine, other, 0x1504) if odd else prmt(mine, other, 0x5140)
        lo = prmt(mine, other, 0x3726) if odd else prmt(mine, other, 0x7362)
        p_head = 2*q4 + (g & 1)
        for word, row in ((hi, p_head), (lo, 8 + p_head)):
            a = base + kOffP + sw64(row, warp) + 4*(g >> 1)
            for i in range(4): smem[a+i] = byte(word, i)
# ---- P.V: A from ldmatrix.trans + prmt, B = P^T via descriptor ----
def pi(k):  # token of k within a 32-token k-step
    hh, u = k // 16, k % 16; q4, j = u // 4, u % 4
    return 16*hh + (2*q4 + j if j < 2 else 8 + 2*q4 + j - 2)
V = K[:, :512]
O = np.zeros((512, 8), np.int64)
for ks in range(2):
    Bhi = desc_read(smem, base + kOffP + ks*32, 8)
    Blo = desc_read(smem, base + kOffP + 512 + ks*32, 8)
    for k in range(32):   # B rows must be P of token pi(k)
        t = 32*ks + pi(k)
        assert (Bhi[:, k] == Phi[t]).all() and (Blo[:, k] == Plo[t]).all(), "P^T layout"
    for i in range(8):
        # A fragments of all 4 warps -> the 64 x 32 A matrix of this wgmma
        A = np.zeros((64, 32), np.int64)
        for warp in range(4):
            addrs = []
            for lane in range(32):
                v_row = 8*(lane >> 3) + (lane & 7)
                v_lane = v_row*64 + (((warp ^ (v_row >> 1)) & 3) << 4)
                addrs.append(stage + i*kSlab + ks*32*64 + v_lane)
            for lane in range(32):
                g, q4 = lane >> 2, lane & 3
                R = []
                for m in range(4):
                    r0 = addrs[8*m + 2*q4]; r1 = addrs[8*m + 2*q4 + 1]
                    lo16 = smem[r0 + 2*g] | smem[r0 + 2*g + 1] << 8
                    hi16 = smem[r1 + 2*g] | smem[r1 + 2*g + 1] << 8
                    R.append(int(lo16 | hi16 << 16))
                regs = [prmt(R[0], R[1], 0x6420), prmt(R[0], R[1], 0x7531), prmt(R[2], R[3], 0x6420), prmt(R[2], R[3], 0x7531)]
                for reg in range(4):
                    v1, v2 = reg % 2, reg // 2
                    for v0 in range(4):
                        A[16*warp + g + 8*v1, 4*q4 + v0 + 16*v2] = byte(regs[reg], v0)
        D = A @ Bhi.T + A @ Blo.T     # [64 rows][8 heads]
        for warp in range(4):
            for lane in range(32):
                g, q4 = lane >> 2, lane & 3
                d = cfrag(D, warp, lane, 8)
                c = 4*i + warp
                for hh in range(2):
                    O[16*c + 2*g, 2*q4 + hh] += d[hh]
                    O[16*c + 2*g + 1, 2*q4 + hh] += d[2 + hh]
ref = V.T @ (Phi + Plo)
assert (O == ref).all(), "P.V mapping"
print("P.V: ldmatrix.trans + prmt A fragments, P^T words, output dims OK")
