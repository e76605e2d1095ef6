// Weight sharding: a slice of a quantized Linear holds exactly the values of
// the same slice of the full weight, cuts off the scale groups are refused,
// and column-/row-parallel pieces recompose the full product.
#include "dist/shard.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "quant/fp8_block.h"
#include "quant/int4_group.h"
#include "quant/mxfp4.h"

namespace mx {
namespace {

std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> values(static_cast<size_t>(n));
  for (auto& x : values) x = round_bf16(d(gen));
  return values;
}

LinearWeight make(WeightFormat f, int64_t out, int64_t in) {
  std::vector<float> w = random_values(out * in, 7);
  LinearWeight l;
  l.name = "test.linear";
  l.format = f;
  l.out_features = out;
  l.in_features = in;
  switch (f) {
    case WeightFormat::Dense: l.weight = Tensor::from_f32(w, {out, in}).to(DType::BF16); break;
    case WeightFormat::Mxfp4: {
      Mxfp4Matrix m = mxfp4_quantize_matrix(w.data(), out, in);
      l.weight = m.weight, l.scale = m.scale, l.group_size = 32;
      break;
    }
    case WeightFormat::Int4Group: {
      Int4GroupMatrix m = int4_group_quantize(w.data(), out, in, 32);
      l.weight = m.packed, l.scale = m.scale, l.group_size = 32;
      break;
    }
    case WeightFormat::Fp8Block: {
      Fp8BlockMatrix m = fp8_block_quantize(w.data(), out, in);
      l.weight = m.weight, l.scale = m.scale_inv, l.group_size = 128;
      break;
    }
  }
  return l;
}

// Values [r0, r1) x [c0, c1) of the full dequantized weight.
std::vector<float> block(const LinearWeight& w, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  Tensor full = dequantize_to_f32(w);
  std::vector<float> out;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) out.push_back(full.get_f32(r * w.in_features + c));
  return out;
}

class ShardFormats : public ::testing::TestWithParam<WeightFormat> {};

TEST_P(ShardFormats, SlicesHoldTheFullWeightsValues) {
  const LinearWeight w = make(GetParam(), 256, 512);
  const LinearWeight rows = slice_out_features(w, 128, 256);
  EXPECT_EQ(rows.out_features, 128);
  EXPECT_EQ(dequantize_to_f32(rows).to_f32_vector(), block(w, 128, 256, 0, 512));
  const LinearWeight cols = slice_in_features(w, 256, 512);
  EXPECT_EQ(cols.in_features, 256);
  EXPECT_EQ(dequantize_to_f32(cols).to_f32_vector(), block(w, 0, 256, 256, 512));
}

TEST_P(ShardFormats, ZeroExpertIsZero) {
  const LinearWeight z = zero_linear_like(make(GetParam(), 64, 128));
  for (float v : dequantize_to_f32(z).to_f32_vector()) ASSERT_EQ(v, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(All, ShardFormats,
                         ::testing::Values(WeightFormat::Dense, WeightFormat::Mxfp4, WeightFormat::Int4Group,
                                           WeightFormat::Fp8Block));

TEST(Shard, CutsInsideScaleGroupsAreRefused) {
  EXPECT_THROW(slice_in_features(make(WeightFormat::Mxfp4, 8, 128), 16, 128), InvalidArgument);
  EXPECT_THROW(slice_in_features(make(WeightFormat::Int4Group, 8, 128), 8, 128), InvalidArgument);
  try {
    ShardSpec s{0, 2};
    row_parallel(make(WeightFormat::Mxfp4, 8, 32), s);  // 16 columns per rank: half a group
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("MXFP4 stores scales per 32"), std::string::npos) << e.what();
  }
}

TEST(Shard, Fp8CutInsideItsBlocksKeepsTheExactValues) {
  const LinearWeight w = make(WeightFormat::Fp8Block, 384, 256);
  const LinearWeight rows = slice_out_features(w, 192, 384);
  EXPECT_EQ(rows.format, WeightFormat::Dense);
  EXPECT_EQ(dequantize_to_f32(rows).to_f32_vector(), block(w, 192, 384, 0, 256));
  const LinearWeight cols = slice_in_features(w, 64, 256);
  EXPECT_EQ(dequantize_to_f32(cols).to_f32_vector(), block(w, 0, 384, 64, 256));
}

TEST(Shard, SlicesOfOwnedMemoryLetTheFullWeightGo) {
  const LinearWeight w = make(WeightFormat::Mxfp4, 256, 64);  // heap tensors, as dummy weights are
  const LinearWeight half = slice_out_features(w, 0, 128);
  EXPECT_EQ(half.weight.storage()->size(), half.weight.nbytes());
  EXPECT_NE(half.weight.storage(), w.weight.storage());
}

TEST(Shard, PartsCoverTheWholeAndRefuseUnevenSplits) {
  EXPECT_EQ((ShardSpec{1, 4}.part(64, "heads")), (std::pair<int64_t, int64_t>{16, 32}));
  EXPECT_EQ((ShardSpec{0, 1}.part(7, "heads")), (std::pair<int64_t, int64_t>{0, 7}));
  EXPECT_THROW(ShardSpec({0, 3}).part(64, "heads"), InvalidArgument);
}

TEST(Shard, ColumnAndRowParallelPiecesRecomposeTheWeight) {
  const LinearWeight w = make(WeightFormat::Mxfp4, 64, 128);
  std::vector<float> cols_joined, full = dequantize_to_f32(w).to_f32_vector();
  std::vector<float> rows_joined;
  for (int r = 0; r < 2; ++r) {
    ShardSpec s{r, 2};
    for (float v : dequantize_to_f32(column_parallel(w, s)).to_f32_vector()) rows_joined.push_back(v);
    LinearWeight piece = row_parallel(w, s, 32);
    EXPECT_EQ(piece.in_features, 64);
    EXPECT_EQ(dequantize_to_f32(piece).to_f32_vector(), block(w, 0, 64, 64 * r, 64 * (r + 1)));
  }
  EXPECT_EQ(rows_joined, full);
}

TEST(Shard, RowParallelBiasStaysOnRankZero) {
  LinearWeight w = make(WeightFormat::Dense, 4, 64);
  w.bias = Tensor::from_f32({1, 2, 3, 4}, {4});
  EXPECT_TRUE(row_parallel(w, ShardSpec{0, 2}).bias.defined());
  EXPECT_FALSE(row_parallel(w, ShardSpec{1, 2}).bias.defined());
  EXPECT_EQ(column_parallel(w, ShardSpec{1, 2}).bias.to_f32_vector(), (std::vector<float>{3, 4}));
}

}  // namespace
}  // namespace mx
