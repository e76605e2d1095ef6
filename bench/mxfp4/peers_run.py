#!/usr/bin/env python3
"""Same-run peer numbers for bench/mxfp4: imports ../shared/peers/mxfp4_peers.py
(path given by --peers) and times, at this bench's shapes only, Triton
dot_scaled (BF16 x MXFP4), cuBLAS BF16 on dequantized weights, and the torch
BF16 grouped-GEMM MoE step. Writes one JSON line per measurement."""
import argparse, importlib.util, json, sys

ap = argparse.ArgumentParser()
ap.add_argument("--peers", required=True, help="path to mxfp4_peers.py")
ap.add_argument("--json", required=True)
ap.add_argument("--quick", action="store_true")
ap.add_argument("--moe-tokens", type=int, nargs="+", help="only the MoE step at these token counts")
ap.add_argument("--decode", action="store_true", help="the rows of mxfp4_bench --decode only")
ap.add_argument("--dense", action="store_true", help="the dense rows of mxfp4_bench --dense only (no MoE)")
args = ap.parse_args()

spec = importlib.util.spec_from_file_location("mxfp4_peers", args.peers)
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)
import torch
from triton.testing import do_bench

out = open(args.json, "w")
def emit(**r):
    print(json.dumps(r), flush=True)
    out.write(json.dumps(r) + "\n"); out.flush()

torch.manual_seed(0)
shapes = [("dense_gate_up", 36864, 7168), ("dense_down", 7168, 18432),
          ("expert_gate_up", 4096, 7168), ("expert_down", 7168, 2048)]
Ms = [1, 8] if args.decode else [16, 32, 64] if args.dense else [1, 64] if args.quick else [1, 8, 32, 64]
if args.dense:
    dense_too = True
elif args.decode:
    shapes = shapes[:2]
    args.moe_tokens = args.moe_tokens or [1, 2, 8]
    dense_too = True
else:
    dense_too = not args.moe_tokens
for name, N, K in (shapes if dense_too else []):
    codes, scales = peers.random_mxfp4(N, K)
    w = peers.dequant_mxfp4(codes, scales)
    for M in Ms:
        a = torch.randn(M, K, dtype=torch.bfloat16, device="cuda")
        ref = a @ w.t()
        err = peers.rel_err(peers.triton_mxfp4(a, codes, scales), ref)
        t_tri = do_bench(lambda: peers.triton_mxfp4(a, codes, scales), return_mode="median")
        t_cub = do_bench(lambda: a @ w.t(), return_mode="median")
        emit(what="gemm", shape=name, N=N, K=K, M=M, triton_us=round(t_tri * 1e3, 2),
             cublas_bf16_us=round(t_cub * 1e3, 2), triton_rel_err=round(err, 5))
    del codes, scales, w

if args.dense:
    sys.exit(0)
E, H, I, topk = 384, 7168, 2048, 8
w13 = torch.randn(E, H, 2 * I, dtype=torch.bfloat16, device="cuda") * 0.02
w2 = torch.randn(E, I, H, dtype=torch.bfloat16, device="cuda") * 0.02
for T in (args.moe_tokens or ([1, 2, 8, 40, 8192] if args.quick else [1, 2, 8, 40, 512, 8192])):
    x = torch.randn(T, H, dtype=torch.bfloat16, device="cuda")
    idx = torch.stack([torch.randperm(E, device="cuda")[:topk] for _ in range(T)])
    def step():  # as in mxfp4_peers.main
        flat = idx.flatten(); order = flat.argsort()
        xs = x.repeat_interleave(topk, 0)[order]
        offs = torch.bincount(flat, minlength=E).cumsum(0).to(torch.int32)
        h = torch._grouped_mm(xs, w13, offs=offs)
        g, u = h.chunk(2, dim=-1)
        return torch._grouped_mm((torch.nn.functional.silu(g) * u).contiguous(), w2, offs=offs)
    step()
    t = do_bench(step, return_mode="median")
    tflops = 6.0 * T * topk * H * I / (t * 1e-3) / 1e12
    emit(what="moe", T=T, touched=int(torch.unique(idx).numel()), torch_bf16_grouped_us=round(t * 1e3, 1),
         torch_tflops=round(tflops, 1))
