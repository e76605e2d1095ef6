#include "dist/shard.h"

#include <atomic>

#include "core/error.h"
#include "core/log.h"

namespace mx {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_range(const LinearWeight& w, int64_t begin, int64_t end, int64_t total, const char* what) {
  if (begin < 0 || begin >= end || end > total)
    fail_input("{}: {} [{}, {}) outside 0..{}", w.name, what, begin, end, total);
}

// A cut of a quantized weight must fall on its group boundaries.
void check_aligned(const LinearWeight& w, int64_t begin, int64_t end, int64_t total, int64_t group, const char* what) {
  if (begin % group != 0 || (end % group != 0 && end != total))
    fail_input("{}: cannot shard {} at [{}, {}): {} stores scales per {} (choose a parallel size that divides "
               "the {} into whole groups)", w.name, what, begin, end, w.format == WeightFormat::Fp8Block ? "FP8 block" :
               w.format == WeightFormat::Mxfp4 ? "MXFP4" : "INT4", group, what);
}

// A row slice of a tensor in owned memory (e.g. a dummy weight) is copied, so
// the full tensor is freed once loaded; slices of a mapped file stay views.
Tensor compact(const Tensor& t) {
  if (!t.defined() || dynamic_cast<const HeapStorage*>(t.storage().get()) == nullptr) return t;
  return t.nbytes() < t.storage()->size() ? t.clone() : t;
}

bool fp8_cut_off_blocks(const LinearWeight& w, int64_t begin, int64_t end, int64_t total) {
  return w.format == WeightFormat::Fp8Block && (begin % w.group_size != 0 || (end % w.group_size != 0 && end != total));
}

// An FP8 slice that does not fall on the 128x128 scale blocks cannot keep one
// scale per block: it becomes the exact F32 values fp8 * scale_inv (as the
// CPU reference computes them), logged once since it costs 4x the bytes.
LinearWeight fp8_slice_as_f32(const LinearWeight& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  static std::atomic<int> warned{0};
  if (warned++ == 0)
    log::warn("{}: shard boundary inside FP8 128x128 blocks; that shard is held as F32 (exact, 4x the bytes)", w.name);
  Tensor full = dequantize_to_f32(w).slice_rows(r0, r1);
  LinearWeight s = w;
  s.format = WeightFormat::Dense;
  s.group_size = 0;
  s.scale = Tensor();
  s.weight = full.copy_cols(c0, c1);
  s.out_features = r1 - r0;
  s.in_features = c1 - c0;
  if (w.bias.defined() && (r0 != 0 || r1 != w.out_features)) s.bias = w.bias.slice_rows(r0, r1);
  return s;
}

}  // namespace

std::pair<int64_t, int64_t> ShardSpec::part(int64_t units, const std::string& what) const {
  if (world <= 1) return {0, units};
  if (units % world != 0)
    fail_input("{}: {} does not split over {} ranks (tensor/expert parallel size must divide it)", what, units, world);
  const int64_t per = units / world;
  return {per * rank, per * (rank + 1)};
}

void ShardSpec::all_reduce(Tensor& x) const {
  if (world <= 1) return;
  MX_CHECK(comm != nullptr, "sharded over {} ranks without a communicator", world);
  comm->all_reduce_sum(x);
}

LinearWeight slice_out_features(const LinearWeight& w, int64_t begin, int64_t end) {
  check_range(w, begin, end, w.out_features, "output features");
  if (fp8_cut_off_blocks(w, begin, end, w.out_features)) return fp8_slice_as_f32(w, begin, end, 0, w.in_features);
  LinearWeight s = w;
  s.out_features = end - begin;
  s.weight = w.weight.slice_rows(begin, end);
  switch (w.format) {
    case WeightFormat::Dense: break;
    case WeightFormat::Mxfp4:
    case WeightFormat::Int4Group: s.scale = w.scale.slice_rows(begin, end); break;
    case WeightFormat::Fp8Block:
      check_aligned(w, begin, end, w.out_features, w.group_size, "output features");
      s.scale = w.scale.slice_rows(begin / w.group_size, ceil_div(end, w.group_size));
      break;
  }
  if (w.bias.defined()) s.bias = w.bias.slice_rows(begin, end);
  s.weight = compact(s.weight);
  s.scale = compact(s.scale);
  s.bias = compact(s.bias);
  return s;
}

LinearWeight slice_in_features(const LinearWeight& w, int64_t begin, int64_t end) {
  check_range(w, begin, end, w.in_features, "input features");
  if (fp8_cut_off_blocks(w, begin, end, w.in_features)) return fp8_slice_as_f32(w, 0, w.out_features, begin, end);
  LinearWeight s = w;
  s.in_features = end - begin;
  switch (w.format) {
    case WeightFormat::Dense: s.weight = w.weight.copy_cols(begin, end); break;
    case WeightFormat::Mxfp4:  // 2 codes per byte, one E8M0 scale per 32
      check_aligned(w, begin, end, w.in_features, 32, "input features");
      s.weight = w.weight.copy_cols(begin / 2, end / 2);
      s.scale = w.scale.copy_cols(begin / 32, end / 32);
      break;
    case WeightFormat::Int4Group:  // 8 codes per int32, one scale per group
      check_aligned(w, begin, end, w.in_features, w.group_size, "input features");
      s.weight = w.weight.copy_cols(begin / 8, end / 8);
      s.scale = w.scale.copy_cols(begin / w.group_size, end / w.group_size);
      break;
    case WeightFormat::Fp8Block:
      check_aligned(w, begin, end, w.in_features, w.group_size, "input features");
      s.weight = w.weight.copy_cols(begin, end);
      s.scale = w.scale.copy_cols(begin / w.group_size, ceil_div(end, w.group_size));
      break;
  }
  return s;
}

LinearWeight column_parallel(const LinearWeight& w, const ShardSpec& s, int64_t unit) {
  if (!s.sharded()) return w;
  if (unit <= 0 || w.out_features % unit != 0)
    fail_input("{}: {} output features are not whole units of {}", w.name, w.out_features, unit);
  auto [b, e] = s.part(w.out_features / unit, w.name + " (column-parallel units)");
  return slice_out_features(w, b * unit, e * unit);
}

LinearWeight row_parallel(const LinearWeight& w, const ShardSpec& s, int64_t unit) {
  if (!s.sharded()) return w;
  if (unit <= 0 || w.in_features % unit != 0)
    fail_input("{}: {} input features are not whole units of {}", w.name, w.in_features, unit);
  auto [b, e] = s.part(w.in_features / unit, w.name + " (row-parallel units)");
  LinearWeight r = slice_in_features(w, b * unit, e * unit);
  if (s.rank != 0) r.bias = Tensor();
  return r;
}

namespace {

// A Linear's share along `axis` (output features: column-parallel; input
// features: row-parallel), read as that slice when the format allows it.
LinearWeight load_parallel(const WeightLoader& w, const std::string& name, const ShardSpec& s,
                           WeightLoader::Features axis) {
  if (!s.sharded()) return w.linear(name);
  const bool out = axis == WeightLoader::Features::Out;
  if (const auto features = w.mxfp4_features(name)) {
    auto [b, e] = s.part(out ? features->first : features->second,
                         name + (out ? " (column-parallel units)" : " (row-parallel units)"));
    return w.mxfp4_part(name, *features, axis, b, e);
  }
  return out ? column_parallel(w.linear(name), s) : row_parallel(w.linear(name), s);
}

}  // namespace

LinearWeight load_column_parallel(const WeightLoader& w, const std::string& name, const ShardSpec& s) {
  return load_parallel(w, name, s, WeightLoader::Features::Out);
}

LinearWeight load_row_parallel(const WeightLoader& w, const std::string& name, const ShardSpec& s) {
  return load_parallel(w, name, s, WeightLoader::Features::In);
}

LinearWeight zero_linear_like(const LinearWeight& w) {
  LinearWeight z = w;
  z.name = w.name + " (zero: owned by another rank)";
  z.bias = Tensor();
  z.weight = Tensor::zeros(w.weight.dtype(), w.weight.shape());
  if (w.scale.defined()) z.scale = Tensor::zeros(w.scale.dtype(), w.scale.shape());
  if (w.format == WeightFormat::Int4Group) {  // offset-8 codes: nibble 8 is the value 0
    int32_t* p = z.weight.data<int32_t>();
    for (int64_t i = 0; i < z.weight.numel(); ++i) p[i] = int32_t(0x88888888u);
  }
  return z;
}

}  // namespace mx
