// CudaOps MoE: routing on the GPU (routing.cu) and fused_moe.
//  - MXFP4 experts whose shapes fit src/cuda's fused_moe_decode (W4A16, or
//    W4A4 when every expert projection quantizes its input; up to 1024 experts, hidden % 256 == 0, intermediate % 64 == 0, no biases): the
//    experts are packed once into its MoeWeights layout (gate_up rows
//    interleaved by 8, host/mxfp4_layout.h) and the whole MoE is three
//    launches with no host synchronization. x and the SiLU product go through
//    BF16 (the kernel's inputs); the output is F32.
//    W4A4: x is quantize-dequantized from F32 (bit-exact to the CPU's
//    quantizer), h per 32 inside fused_moe_decode (from BF16, as vLLM's
//    emulation does).
//  - Every other case (BF16/FP8/INT4 experts, MXFP4 experts of which only some
//    quantize their inputs, other shapes, and
//    the f32_activations reference mode): the expert ids are copied to the
//    host once per call (T * top_k ints, one synchronization) to build the
//    per-expert token lists; then per used expert, on the device: gather rows,
//    linear gate/up, silu_and_mul, linear down, weighted add into the output
//    (in expert order, as the CPU).
#include <algorithm>

#include "core/error.h"
#include "cuda/backend/cuda_ops.h"
#include "cuda/backend/device_memory.h"
#include "cuda/backend/kernels.h"
#include "cuda/host/mxfp4_bits.h"
#include "cuda/host/mxfp4_layout.h"
#include "cuda/mxfp4_kernels.h"

namespace mx::cuda {

namespace {

float* f32(const Tensor& t) { return reinterpret_cast<float*>(t.raw()); }

bool packable_mxfp4(const LinearWeight& w, int64_t out, int64_t in) {
  return w.format == WeightFormat::Mxfp4 && w.out_features == out && w.in_features == in && !w.bias.defined() &&
         w.weight.dtype() == DType::U8 && w.weight.numel() == out * in / 2 && w.scale.defined() &&
         (w.scale.dtype() == DType::U8 || w.scale.dtype() == DType::E8M0) && w.scale.numel() == out * in / 32 &&
         !on_device(w.weight);
}

// Scale bytes: 255 (NaN) is refused, as pack_mxfp4 does; returns whether
// any byte needs the kernels' big-scale path.
bool check_scales(const LinearWeight& w) {
  bool big = false;
  const uint8_t* s = w.scale.data<uint8_t>();
  for (int64_t i = 0; i < w.scale.numel(); ++i) {
    if (s[i] == kE8m0Nan) fail_input("{}: E8M0 scale 255 (NaN) at byte {}: NaN blocks are not supported", w.name, i);
    big |= s[i] > kMaxSimpleScale;
  }
  return big;
}

}  // namespace

MoeRouting CudaOps::route(const Tensor& logits_in, const Tensor& bias, const RoutingParams& p, bool sigmoid) {
  const char* op = sigmoid ? "route_noaux_tc" : "route_softmax";
  if (!logits_in.defined() || logits_in.dtype() != DType::F32 || logits_in.ndim() != 2)
    fail_input("{}: expected F32 [tokens, experts] logits, got {}", op,
               logits_in.defined() ? logits_in.describe() : "undefined");
  const int64_t tokens = logits_in.dim(0), experts = logits_in.dim(1);
  MX_CHECK(p.top_k > 0 && p.top_k <= experts, "routing: top_k {} of {} experts", p.top_k, experts);
  MX_CHECK(p.n_group >= 1 && experts % p.n_group == 0 && p.topk_group >= 1 && p.topk_group <= p.n_group,
           "routing: {} experts in {} groups, keeping {}", experts, p.n_group, p.topk_group);
  if (experts > kMaxRoutedExperts || p.top_k > kMaxRoutedTopK || p.n_group > kMaxRoutingGroups)
    fail_input("{}: {} experts, top_k {}, {} groups: the CUDA router handles up to {} / {} / {}", op, experts, p.top_k,
               p.n_group, kMaxRoutedExperts, kMaxRoutedTopK, kMaxRoutingGroups);
  MX_CHECK(!bias.defined() || bias.numel() == experts, "correction bias {} for {} experts",
           bias.defined() ? bias.describe() : "", experts);
  Tensor logits = to_device(logits_in);
  const float* dbias = bias.defined() ? f32(device_weight(bias, op, /*force_f32=*/true)) : nullptr;
  MoeRouting r{p.top_k, fresh(DType::I32, {tokens, p.top_k}), fresh(DType::F32, {tokens, p.top_k})};
  RoutingLaunch l;
  l.tokens = tokens, l.experts = experts, l.top_k = p.top_k;
  l.n_group = p.n_group, l.topk_group = p.topk_group;
  l.sigmoid = sigmoid, l.normalize = p.normalize, l.routed_scaling_factor = p.routed_scaling_factor;
  launch_routing(f32(logits), dbias, l, r.expert_ids.data<int32_t>(), f32(r.weights), stream_);
  check_launch(op);
  return r;
}

MoeRouting CudaOps::route_noaux_tc(const Tensor& logits, const Tensor& bias, const RoutingParams& p) {
  return route(logits, bias, p, true);
}

MoeRouting CudaOps::route_softmax(const Tensor& logits, const RoutingParams& p) {
  return route(logits, Tensor(), p, false);
}

const CudaOps::PackedMoe* CudaOps::packed_moe(const std::vector<ExpertWeights>& experts) {
  if (experts.empty() || options_.f32_activations) return nullptr;
  const uint8_t* key = experts.front().gate.weight.defined() ? experts.front().gate.weight.raw() : nullptr;
  if (!key) return nullptr;
  if (auto it = moes_.find(key); it != moes_.end()) return it->second.get();
  const int64_t E = int64_t(experts.size()), I = experts.front().gate.out_features,
                H = experts.front().gate.in_features;
  bool fits = E <= 1024 && H > 0 && I > 0 && H % 256 == 0 && I % 64 == 0;
  // W4A4 is fused when every projection of every expert quantizes its input
  // (the checkpoint's spec); a mix takes the generic path.
  const auto quantized = [&](const ExpertWeights& e) {
    return mode_ == ActivationMode::W4A4 ? int(e.gate.quantize_input) + e.up.quantize_input + e.down.quantize_input : 0;
  };
  const int w4a4 = quantized(experts.front());
  for (const ExpertWeights& e : experts) {
    if (!fits) break;
    fits = packable_mxfp4(e.gate, I, H) && packable_mxfp4(e.up, I, H) && packable_mxfp4(e.down, H, I) &&
           (w4a4 == 0 || w4a4 == 3) && quantized(e) == w4a4;
  }
  if (!fits) {
    moes_.emplace(key, nullptr);
    return nullptr;
  }
  auto p = std::make_unique<PackedMoe>();
  const int64_t w13_code_bytes = 2 * I * H / 2, w13_scale_bytes = 2 * I * H / 32;
  const int64_t w2_code_bytes = H * I / 2, w2_scale_bytes = H * I / 32;
  p->w13_codes = device_persistent(DType::U8, {E * w13_code_bytes}, "fused_moe weights");
  p->w13_scales = device_persistent(DType::U8, {E * w13_scale_bytes}, "fused_moe weights");
  p->w2_codes = device_persistent(DType::U8, {E * w2_code_bytes}, "fused_moe weights");
  p->w2_scales = device_persistent(DType::U8, {E * w2_scale_bytes}, "fused_moe weights");
  // The checkpoint layout of one expert at a time, then the device re-layout.
  Tensor raw13_codes = fresh(DType::U8, {w13_code_bytes}), raw13_scales = fresh(DType::U8, {w13_scale_bytes});
  Tensor raw2_codes = fresh(DType::U8, {w2_code_bytes}), raw2_scales = fresh(DType::U8, {w2_scale_bytes});
  const std::vector<int64_t> order = gate_up_interleaved_rows(I);
  Tensor order_host = Tensor::empty(DType::I64, {2 * I});
  std::copy(order.begin(), order.end(), order_host.data<int64_t>());
  Tensor order_dev = copy_to_device(order_host, stream_);
  bool big = false;
  auto put = [&](const Tensor& dst, int64_t at, const Tensor& src) {
    check_cuda(cudaMemcpyAsync(dst.raw() + at, src.raw(), src.nbytes(), cudaMemcpyHostToDevice, stream_),
               "fused_moe", "expert upload");
  };
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = experts[size_t(e)];
    big |= check_scales(x.gate) | check_scales(x.up) | check_scales(x.down);
    put(raw13_codes, 0, x.gate.weight), put(raw13_codes, I * H / 2, x.up.weight);
    put(raw13_scales, 0, x.gate.scale), put(raw13_scales, I * H / 32, x.up.scale);
    put(raw2_codes, 0, x.down.weight), put(raw2_scales, 0, x.down.scale);
    pack_mxfp4_device(raw13_codes.data<uint8_t>(), raw13_scales.data<uint8_t>(), 2 * I, H, order_dev.data<int64_t>(),
                      p->w13_codes.data<uint8_t>() + e * w13_code_bytes,
                      p->w13_scales.data<uint8_t>() + e * w13_scale_bytes, stream_);
    pack_mxfp4_device(raw2_codes.data<uint8_t>(), raw2_scales.data<uint8_t>(), H, I, nullptr,
                      p->w2_codes.data<uint8_t>() + e * w2_code_bytes,
                      p->w2_scales.data<uint8_t>() + e * w2_scale_bytes, stream_);
    for (const LinearWeight* w : {&x.gate, &x.up, &x.down}) {
      p->keep_alive.push_back(w->weight.storage());
      p->keep_alive.push_back(w->scale.storage());
    }
  }
  check_cuda(cudaStreamSynchronize(stream_), "fused_moe", "expert packing");
  p->weights = MoeWeights{p->w13_codes.data<uint8_t>(), p->w13_scales.data<uint8_t>(), p->w2_codes.data<uint8_t>(),
                          p->w2_scales.data<uint8_t>(), int(E), int(H), int(I), big, w4a4 == 3};
  return moes_.emplace(key, std::move(p)).first->second.get();
}

Tensor CudaOps::fused_moe(const Tensor& x_in, const std::vector<ExpertWeights>& experts, const MoeRouting& r) {
  if (!x_in.defined() || x_in.dtype() != DType::F32 || x_in.ndim() < 1)
    fail_input("fused_moe: expected an F32 activation, got {}", x_in.defined() ? x_in.describe() : "undefined");
  const int64_t tokens = x_in.dim(0);
  MX_CHECK(r.expert_ids.defined() && r.weights.defined() && r.expert_ids.dtype() == DType::I32 &&
               r.expert_ids.numel() == tokens * r.top_k && r.weights.numel() == tokens * r.top_k,
           "fused_moe: routing {} for input {} with top_k {}",
           r.expert_ids.defined() ? r.expert_ids.describe() : "undefined", x_in.describe(), r.top_k);
  const PackedMoe* packed = packed_moe(experts);
  if (!packed || tokens == 0) return fused_moe_generic(x_in, experts, r);
  const MoeWeights& w = packed->weights;
  MX_CHECK(x_in.numel() == tokens * w.hidden, "fused_moe: input {} for hidden size {}", x_in.describe(), w.hidden);
  Tensor x = to_device(x_in), ids = to_device(r.expert_ids), weights = to_device(r.weights);
  Tensor xb = fresh(DType::BF16, {tokens, w.hidden});
  // W4A4: quantized from F32 here so that x's codes equal the CPU's; the
  // kernel is told (MoeConfig::x_quantized) and does not quantize again.
  if (w.w4a4) launch_mxfp4_qdq_f32_to_bf16(f32(x), x.numel(), reinterpret_cast<uint16_t*>(xb.raw()), stream_);
  else launch_f32_to_bf16(f32(x), x.numel(), reinterpret_cast<uint16_t*>(xb.raw()), stream_);
  check_launch("fused_moe");
  Tensor workspace = fresh(DType::U8, {int64_t(fused_moe_workspace_bytes(w, int(tokens), int(r.top_k)))});
  Tensor out = fresh(DType::F32, {tokens, w.hidden});
  run_fused_moe(w, reinterpret_cast<const uint16_t*>(xb.raw()), ids.data<int32_t>(), f32(weights), int(tokens),
                int(r.top_k), f32(out), workspace.raw());
  return out;
}

Tensor CudaOps::fused_moe_generic(const Tensor& x_in, const std::vector<ExpertWeights>& experts, const MoeRouting& r) {
  const int64_t tokens = x_in.dim(0), hidden = tokens ? x_in.numel() / tokens : 0, k = r.top_k;
  Tensor ids = to_host(r.expert_ids);  // the one synchronization of this path
  std::vector<std::vector<int32_t>> pairs(experts.size());
  for (int64_t i = 0; i < tokens * k; ++i) {
    const int32_t e = ids.data<int32_t>()[i];
    MX_CHECK(e >= 0 && size_t(e) < experts.size(), "fused_moe: expert {} of {}", e, experts.size());
    pairs[size_t(e)].push_back(int32_t(i));
  }
  // Per-expert lists back to back: token rows (gather) and pair indices (weights).
  std::vector<int64_t> offsets(experts.size() + 1, 0);
  for (size_t e = 0; e < experts.size(); ++e) offsets[e + 1] = offsets[e] + int64_t(pairs[e].size());
  Tensor rows_host = Tensor::empty(DType::I64, {tokens * k}), pairs_host = Tensor::empty(DType::I32, {tokens * k});
  for (size_t e = 0; e < experts.size(); ++e)
    for (size_t i = 0; i < pairs[e].size(); ++i) {
      rows_host.data<int64_t>()[offsets[e] + int64_t(i)] = pairs[e][i] / k;
      pairs_host.data<int32_t>()[offsets[e] + int64_t(i)] = pairs[e][i];
    }
  Tensor rows = copy_to_device(rows_host, stream_), pair_ids = copy_to_device(pairs_host, stream_);
  Tensor x = to_device(x_in), weights = to_device(r.weights);
  Tensor out = fresh(DType::F32, {tokens, hidden});
  if (out.nbytes()) check_cuda(cudaMemsetAsync(out.raw(), 0, out.nbytes(), stream_), "fused_moe", "cudaMemsetAsync");
  for (size_t e = 0; e < experts.size(); ++e) {
    const int64_t n = offsets[e + 1] - offsets[e];
    if (n == 0) continue;
    Tensor xe = fresh(DType::F32, {n, hidden});
    launch_gather_rows(f32(x), rows.data<int64_t>() + offsets[e], n, hidden, f32(xe), stream_);
    check_launch("fused_moe");
    Tensor h = silu_and_mul(linear(xe, experts[e].gate), linear(xe, experts[e].up));
    Tensor y = linear(h, experts[e].down);
    MX_CHECK(y.numel() == n * hidden, "fused_moe: expert {} down projection gives {} for {} rows of {}", e,
             y.describe(), n, hidden);
    launch_moe_scatter_add(f32(y), pair_ids.data<int32_t>() + offsets[e], f32(weights), k, n, hidden, f32(out),
                           stream_);
    check_launch("fused_moe");
  }
  return out;
}

void CudaOps::run_fused_moe(const MoeWeights& w, const uint16_t* x, const int* ids, const float* weights, int T,
                            int topk, float* out, void* workspace) {
  const RefusedShapes::Key size{T, topk, w.experts};
  MoeConfig automatic;
  automatic.x_quantized = w.w4a4;  // fused_moe quantized x from F32 already
  MoeConfig forced = automatic;
  forced.path = options_.moe_path;
  forced.w4a4_mma = options_.w4a4_mma;  // FP8 applies to the prefill paths; decode paths stay BF16
  forced.ws_down_items = options_.moe_ws_down_items;
  // Launches before a refusal write only scratch and `out`, which the rerun on
  // the automatic choices rewrites whole.
  if ((forced.path || forced.w4a4_mma || forced.ws_down_items) &&
      refused_moe_.run_forced(size, "--moe-kernel / --w4a4-mma / ws_down_items",
                              fmt::format("{} tokens x top-{}", T, topk),
                              [&] { fused_moe_decode(w, x, ids, weights, T, topk, out, workspace, stream_, forced); }))
    return;
  fused_moe_decode(w, x, ids, weights, T, topk, out, workspace, stream_, automatic);
}

}  // namespace mx::cuda
