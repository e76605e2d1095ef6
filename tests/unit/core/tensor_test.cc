#include "core/tensor.h"

#include <atomic>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/thread_pool.h"

namespace mx {

TEST(Tensor, SliceRowsSharesStorage) {
  Tensor t = Tensor::from_f32({0, 1, 2, 3, 4, 5}, {3, 2});
  Tensor s = t.slice_rows(1, 3);
  EXPECT_EQ(s.shape(), (Shape{2, 2}));
  EXPECT_EQ(s.get_f32(0), 2.f);
  s.set_f32(0, 9.f);
  EXPECT_EQ(t.get_f32(2), 9.f);
  EXPECT_THROW(t.slice_rows(2, 4), Error);
}

TEST(Tensor, ConvertBf16) {
  Tensor t = Tensor::from_f32({1.f, -2.5f, 3.140625f}, {3});
  Tensor b = t.to(DType::BF16);
  EXPECT_EQ(b.nbytes(), 6u);
  EXPECT_EQ(b.to_f32_vector(), (std::vector<float>{1.f, -2.5f, 3.140625f}));
}

TEST(Tensor, ReshapeChecksNumel) {
  Tensor t = Tensor::empty(DType::BF16, {4, 6});
  EXPECT_EQ(t.reshape({2, 12}).dim(-1), 12);
  EXPECT_THROW(t.reshape({5, 5}), Error);
}

TEST(ThreadPool, CoversRangeExactlyOnce) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  for (int rep = 0; rep < 20; ++rep)
    pool.parallel_for(1000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
    });
  for (auto& h : hits) EXPECT_EQ(h.load(), 20);
}

}  // namespace mx
