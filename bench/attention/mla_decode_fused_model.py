#!/usr/bin/env python3
"""CPU model of mla_decode_fp8_fused_kernel (src/cuda/attention/mla_decode.cu).

Emulates, lane by lane and phase by phase between the kernel's barriers, what
each thread of the fused FP8 kernel loads and computes: the swizzled FP8 stage
(fp8_pos), the prmt-based E4M3 -> BF16 decode, the permuted-k score fragments,
ldmatrix / ldmatrix.trans, mma.m16n8k16, the online softmax, the split
partials and the combine; then compares with a float64 reference (q rounded to
BF16 as the kernel rounds it). It also counts shared-memory bank conflicts of
every access pattern of the kernel. It checks the index mapping only, not the
CUDA code itself: the GPU check is mla_decode_bench (docs/mla-decode.md).

Usage: python3 mla_decode_fused_model.py   (numpy; ~30 s; exit 1 on a failure)
"""
import math
import struct
import sys

import numpy as np

# CPU emulation of the fused kernel's fragment mapping for one 32-token tile.
ROW = 576
def fp8_pos(row,chunk):
    return (chunk & ~7) | ((chunk ^ row) & 7) if chunk < 32 else 32 | ((chunk ^ (row >> 1)) & 3)
def p_pos(row,chunk): return row*64 + (((chunk ^ (row>>1)) & 3) << 4)
def prmt(x, sel):
    b=[(x>>(8*i))&0xff for i in range(4)]+[0,0,0,0]
    r=0
    for n in range(4):
        s=(sel>>(4*n))&0xf
        v=b[s&7]
        if s&8: v=0xff if v&0x80 else 0
        r|=v<<(8*n)
    return r
def fp8x2(x,sel): return ((prmt(x,sel)<<4)&0xffffffff)&0x87f087f0
def bf16(u16):
    return struct.unpack('<f',struct.pack('<I',(u16&0xffff)<<16))[0]
def e4m3(b):
    s=-1 if b&0x80 else 1; e=(b>>3)&15; m=b&7
    return s*(2**-6*(m/8) if e==0 else 2**(e-7)*(1+m/8))
def words_to_pair(w): return bf16(w&0xffff), bf16(w>>16)
def f2bf(x):  # round to bf16 (RNE) -> float
    u=struct.unpack('<I',struct.pack('<f',np.float32(x)))[0]
    u=(u+0x7fff+((u>>16)&1))>>16
    return bf16(u)
K01,K23,K02,K13=0x9180,0xB3A2,0xA280,0xB391
def mma(C,A,B):
    # C[16][8], A frags per lane [32][4] words, B per lane [32][2] words
    Am=np.zeros((16,16)); Bm=np.zeros((16,8))
    for l in range(32):
        g,q4=l>>2,l&3
        a=[words_to_pair(w) for w in A[l]]
        Am[g,2*q4:2*q4+2]=a[0]; Am[g+8,2*q4:2*q4+2]=a[1]; Am[g,2*q4+8:2*q4+10]=a[2]; Am[g+8,2*q4+8:2*q4+10]=a[3]
        b=[words_to_pair(w) for w in B[l]]
        Bm[2*q4:2*q4+2,g]=b[0]; Bm[2*q4+8:2*q4+10,g]=b[1]
    return C+Am@Bm
def pack(a,b):
    ua=struct.unpack('<I',struct.pack('<f',np.float32(a)))[0]; ub=struct.unpack('<I',struct.pack('<f',np.float32(b)))[0]
    ra=(ua+0x7fff+((ua>>16)&1))>>16; rb=(ub+0x7fff+((ub>>16)&1))>>16
    return ra|(rb<<16)
def ldm(buf,addrs,trans):
    # addrs: 32 lane addresses (rows of 16 bytes); returns per lane 4 words
    out=[[0]*4 for _ in range(32)]
    for m in range(4):
        rows=[struct.unpack_from('<8H',buf,addrs[8*m+r]) for r in range(8)]
        for l in range(32):
            g,q4=l>>2,l&3
            if trans: lo,hi=rows[2*q4][g],rows[2*q4+1][g]
            else: lo,hi=rows[g][2*q4],rows[g][2*q4+1]
            out[l][m]=lo|(hi<<16)
    return out


def bank_conflicts():
    """Worst number of distinct 4-byte words per bank over the kernel's access phases."""
    worst = {}
    def conflicts(addrs_bytes, width):
        banks = {}
        for a in addrs_bytes:
            for w in range(width // 4):
                word = a // 4 + w
                banks.setdefault(word % 32, set()).add(word)
        return max(len(v) for v in banks.values())
    def rec(name, v):
        worst[name] = max(worst.get(name, 0), v)
    for st in range(5):
      base=st*32*ROW
      for warp in range(8):
        tg,kq=warp&1,warp>>1
        for n in range(2):
          for i in range(9):
            ks=9*kq+i
            ad=[]
            for l in range(32):
                g,q4=l>>2,l&3; row=16*tg+8*n+g
                ad.append(base+row*ROW+4*q4+fp8_pos(row,ks)*16)
            rec('scores lds32',conflicts(ad,4))
        for kt in range(2):
          for h in range(2):
            for m in range(4):
              ad=[]
              for l in range(8*m,8*m+8):
                a_row=(l&7)+((l>>3)&1)*8; v_row=16*kt+a_row
                ad.append(base+v_row*ROW+fp8_pos(v_row,4*warp+2*h+(l>>4))*16)
              rec('ldsm trans',conflicts(ad,16))
      # cp.async: thread tid row=tid>>3 sub=tid&7, chunk sub+8j; phases of 8 threads
      for j in range(5):
        for ph in range(32):
          ad=[]
          for tid in range(8*ph,8*ph+8):
            row,sub=tid>>3,tid&7; c=sub+8*j
            if c<36: ad.append(base+row*ROW+fp8_pos(row,c)*16)
          rec('cp.async',conflicts(ad,16))
    for kt in range(2):
      for m in range(4):
        ad=[p_pos((l&7)+((l>>3)&1)*8,2*kt+(l>>4)) for l in range(8*m,8*m+8)]
        rec('P ldsm',conflicts(ad,16))
    for warp in range(8):
      ad=[]
      for l in range(32):
        hh=2*warp+(l>>4); j=l&15
        ad.append(p_pos(hh,j>>2)+(j&3)*4)
      rec('P store',conflicts(ad,4))
      tg,kq=warp&1,warp>>1
      for n in range(2):
        for half in range(2):
          for r8 in range(2):
            ad=[]
            for l in range(16*half,16*half+16):
              g,q4=l>>2,l&3; tok=16*tg+8*n+2*q4
              ad.append(((kq*16+g+8*r8)*40+tok)*4)
            rec('part store f2',conflicts(ad,8))
      for k in range(4):
        for half in range(2):
          ad=[(((k*16+2*warp+(l>>4))*40)+2*(l&15))*4 for l in range(16*half,16*half+16)]
          rec('part load f2',conflicts(ad,8))
    return worst

STAGES=5; TILE=32
def run_case(heads, batch, bs, max_ctx, splits, seed):
    rng=np.random.default_rng(seed)
    ctx=[max_ctx]+list(rng.integers(1,max_ctx+1,size=batch-1))
    max_blocks=(max_ctx+bs-1)//bs
    used=sum((c+bs-1)//bs for c in ctx)
    blocks=used+4
    raw=rng.integers(0,256,size=(blocks*bs,576)); raw[(raw&0x7f)==0x7f]&=0xfe
    raw[:bs]=0x70  # poison block 0
    scale=rng.uniform(0.002,0.02,size=blocks*bs)
    e4=np.array([e4m3(b) for b in range(256)])
    deq=e4[raw]*scale[:,None]
    perm=list(rng.permutation(np.arange(1,blocks)))
    table=np.zeros((batch,max_blocks),dtype=np.int64); k=0
    for b in range(batch):
        for i in range((ctx[b]+bs-1)//bs): table[b,i]=perm[k]; k+=1
    q=rng.standard_normal((batch,heads,576))
    sm=1/math.sqrt(192); qs=sm*1.4426950408889634
    block_shift=(bs.bit_length()-1) if bs&(bs-1)==0 else -1
    out=np.full((batch,heads,512),np.nan); ws_o=np.full((splits,batch,heads,512),np.nan); ws_lse=np.full((splits,batch,heads),np.nan)
    for b in range(batch):
      for split in range(splits):
        head0=0
        tiles=(ctx[b]+TILE-1)//TILE; per=(tiles+splits-1)//splits
        t_begin=min(tiles,split*per); t_end=min(tiles,t_begin+per)
        stage=[bytearray(TILE*576) for _ in range(STAGES)]; sscale=np.zeros((STAGES,TILE))
        def row_slot(tile,tid):
            token=tile*TILE+(tid>>3)
            if token>=ctx[b]: return 0
            if block_shift>=0: blk,off=token>>block_shift, token&((1<<block_shift)-1)
            else: blk=token//bs; off=token-blk*bs
            return int(table[b,blk])*bs+off
        def load(slots,tile,st):
            for tid in range(256):
                row,sub=tid>>3,tid&7; valid=tile*TILE+row<ctx[b]; slot=slots[tid]
                for j in range(5):
                    c=sub+8*j
                    if c<36:
                        pos=fp8_pos(row,c)
                        stage[st][row*576+pos*16:row*576+pos*16+16]=bytes(int(v) for v in raw[slot,c*16:c*16+16]) if valid else bytes(16)
                if sub==0: sscale[st,row]=scale[slot] if valid else 0.0
        for s_ in range(STAGES-1):
            if t_begin+s_<t_end: load([row_slot(t_begin+s_,tid) for tid in range(256)],t_begin+s_,s_)
        next_slots=[row_slot(t_begin+STAGES-1,tid) for tid in range(256)] if t_begin+STAGES-1<t_end else [0]*256
        qb=np.zeros((16,576))
        for h in range(min(16,heads)): qb[h]=[f2bf(x*qs*2.0**64) for x in q[b,h]]
        m_run=np.full(16,-np.inf); l_part=np.zeros((16,16))  # [head][own_j]
        o=np.zeros((8,8,16,8))  # warp, n-tile, C 16x8
        for t in range(t_begin,t_end):
            it=t-t_begin
            if t+STAGES-1<t_end:
                load(next_slots,t+STAGES-1,(it+STAGES-1)%STAGES)
                if t+STAGES<t_end: next_slots=[row_slot(t+STAGES,tid) for tid in range(256)]
            st=it%STAGES; stg=stage[st]
            def lds32(a): return struct.unpack_from('<I',stg,a)[0]
            part=np.zeros((4,16,32))
            for warp in range(8):
                tg,kq=warp&1,warp>>1
                for n in range(2):
                    C=np.zeros((16,8))
                    for i in range(9):
                        ks=9*kq+i; A=[];B=[]
                        for l in range(32):
                            g,q4=l>>2,l&3; d=16*ks+4*q4
                            A.append([pack(qb[g,d],qb[g,d+1]),pack(qb[g+8,d],qb[g+8,d+1]),pack(qb[g,d+2],qb[g,d+3]),pack(qb[g+8,d+2],qb[g+8,d+3])])
                            row=16*tg+8*n+g; w=lds32(row*576+4*q4+fp8_pos(row,ks)*16)
                            B.append([fp8x2(w,K01),fp8x2(w,K23)])
                        C=mma(C,A,B)
                    for l in range(32):
                        g,q4=l>>2,l&3; tok=16*tg+8*n+2*q4
                        part[kq,g,tok:tok+2]=C[g,2*q4:2*q4+2]; part[kq,g+8,tok:tok+2]=C[g+8,2*q4:2*q4+2]
            # softmax
            pbuf=bytearray(16*64); alpha_s=np.zeros(16)
            for hh in range(16):
                s=part[:,hh,:].sum(0)
                sv=np.empty(32)
                for j in range(32):
                    sv[j]=s[j]*sscale[st,j]*2.0**56 if t*TILE+j<ctx[b] else -np.inf
                mx=sv.max(); m_new=max(m_run[hh],mx); m_use=0.0 if m_new==-np.inf else m_new
                alpha=2.0**(m_run[hh]-m_use); m_run[hh]=m_new
                p=2.0**(sv-m_use)
                for j in range(16): l_part[hh,j]=l_part[hh,j]*alpha+p[2*j]+p[2*j+1]
                for j in range(16):
                    struct.pack_into('<I',pbuf,p_pos(hh,j>>2)+(j&3)*4,pack(p[2*j]*sscale[st,2*j]*2.0**64,p[2*j+1]*sscale[st,2*j+1]*2.0**64))
                alpha_s[hh]=alpha
            for warp in range(8):
                o[warp,:,:8,:]*=alpha_s[:8,None]; o[warp,:,8:,:]*=alpha_s[8:,None]
                for kt in range(2):
                    pa=ldm(pbuf,[p_pos((l&7)+((l>>3)&1)*8,2*kt+(l>>4)) for l in range(32)],False)
                    for h in range(2):
                        addrs=[]
                        for l in range(32):
                            a_row=(l&7)+((l>>3)&1)*8; v_row=16*kt+a_row
                            addrs.append(v_row*576+fp8_pos(v_row,4*warp+2*h+(l>>4))*16)
                        r=ldm(stg,addrs,True)
                        for idx,(ri,sel) in enumerate([((0,1),K02),((0,1),K13),((2,3),K02),((2,3),K13)]):
                            Bf=[[fp8x2(r[l][ri[0]],sel),fp8x2(r[l][ri[1]],sel)] for l in range(32)]
                            o[warp,4*h+idx]=mma(o[warp,4*h+idx],pa,Bf)
        l=l_part.sum(1)
        for hh in range(16):
            if hh<heads and splits>1: ws_lse[split,b,hh]=m_run[hh]+math.log2(l[hh]) if l[hh]>0 else -np.inf
        for warp in range(8):
            for lane in range(32):
                g,q4=lane>>2,lane&3
                for rr in range(2):
                    h=g+8*rr
                    if h>=heads: continue
                    inv=2.0**56/l[h] if l[h]>0 else 0.0
                    dst=out[b,h] if splits==1 else ws_o[split,b,h]
                    for c in range(4):
                        d=16*(4*warp+c)+4*q4
                        dst[d:d+4]=[o[warp,2*c,h,2*q4]*inv,o[warp,2*c+1,h,2*q4]*inv,o[warp,2*c,h,2*q4+1]*inv,o[warp,2*c+1,h,2*q4+1]*inv]
    if splits>1:
        for b in range(batch):
            for h in range(heads):
                lse=ws_lse[:,b,h]; lmax=lse.max(); acc=np.zeros(512); wsum=0
                if lmax!=-np.inf:
                    for s_ in range(splits):
                        if lse[s_]==-np.inf: continue
                        w=2.0**(lse[s_]-lmax); acc+=w*ws_o[s_,b,h]; wsum+=w
                out[b,h]=acc/wsum if wsum>0 else 0
    # reference (q rounded to bf16 like the kernel)
    err2=ref2=0
    for b in range(batch):
        rows=[int(table[b,tk//bs])*bs+tk%bs for tk in range(ctx[b])]
        K=deq[rows]
        for h in range(heads):
            qv=np.array([f2bf(x*qs) for x in q[b,h]])
            sc=K@qv; p=2.0**(sc-sc.max()); ref=(p@K[:,:512])/p.sum()
            err2+=((out[b,h]-ref)**2).sum(); ref2+=(ref**2).sum()
    rel=math.sqrt(err2/ref2)
    print(f"heads {heads} batch {batch} bs {bs} max_ctx {max_ctx} splits {splits}: rel_err {rel:.2e} finite {np.isfinite(out).all()}",flush=True)
    return rel


def address_forms_ok():
    """The kernel's strength-reduced addresses equal fp8_pos / p_pos of the full row."""
    ok = True
    for row in range(32):
        for sub in range(8):  # fused_load_tile
            for j in range(4):
                ok &= fp8_pos(row, sub + 8 * j) == 8 * j + ((sub ^ row) & 7)
            if sub < 4:
                ok &= fp8_pos(row, 32 + sub) == 32 | ((sub ^ (row >> 1)) & 3)
    for lane in range(32):  # P.V and score offsets
        g, a_row, a_chunk = lane >> 2, (lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4
        for warp in range(8):
            tg, kq = warp & 1, warp >> 1
            for kt in range(2):
                for h in range(2):
                    c = 4 * warp + 2 * h + a_chunk
                    ok &= (16 * kt + a_row) * ROW + fp8_pos(16 * kt + a_row, c) * 16 == \
                        a_row * ROW + fp8_pos(a_row, c) * 16 + kt * 16 * ROW
            for i in range(9):
                for n in range(2):
                    row = 16 * tg + 8 * n + g
                    ok &= fp8_pos(row, 9 * kq + i) == fp8_pos(g, 9 * kq + i)
    return ok


def main():
    ok = address_forms_ok()
    print("address forms:", "ok" if ok else "FAIL")
    for r in range(32):
        ok &= sorted(fp8_pos(r, c) for c in range(36)) == list(range(36))
    for b in range(256):
        if (b & 0x7F) != 0x7F:
            ok &= bf16(fp8x2(b | (b << 8), K01) & 0xFFFF) == e4m3(b) * 2.0**-120
    worst = bank_conflicts()
    print("bank conflicts (worst ways per phase):", worst)
    ok &= all(v == 1 for v in worst.values())
    for args in [(8, 2, 16, 70, 1, 1), (12, 2, 48, 100, 3, 2), (16, 2, 64, 64, 5, 3), (1, 2, 16, 40, 2, 4), (16, 1, 16, 200, 2, 5)]:
        ok &= run_case(*args) < 1e-2
    print("model:", "ok" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
