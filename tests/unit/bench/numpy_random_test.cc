// Expected values were produced by numpy 2.4 (the version in .venv); the
// Python that printed them is next to each test. The dataset integration test
// (tests/integration/test_bench_dataset.py) also compares with numpy live.
#include "bench/numpy_random.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace mx::bench {

// np.random.SeedSequence(s).generate_state(4, np.uint64)
TEST(NumpyRandom, SeedSequenceMatchesNumpy) {
  EXPECT_EQ(seed_sequence_state(0, 4),
            (std::vector<uint64_t>{0xdb2cd7e7b0f478be, 0xabf4641a2c71ba49, 0x20c6ed6d9d7b8d41,
                                   0x2c4099de223c39d4}));
  // An entropy wider than 32 bits is two words.
  EXPECT_EQ(seed_sequence_state((1ULL << 40) + 5, 4),
            (std::vector<uint64_t>{0xdae41755e08a170b, 0x8415abe87ecdcb2c, 0x2525c5b44b9118d0,
                                   0x42c2793f3392bed3}));
}

// np.random.default_rng(0).bit_generator.random_raw(3)
TEST(NumpyRandom, Pcg64RawOutputMatchesNumpy) {
  Pcg64 rng(0);
  EXPECT_EQ(rng.next_uint64(), 0xa30febcfd9c2825fULL);
  EXPECT_EQ(rng.next_uint64(), 0x4510bdf882d9d721ULL);
  EXPECT_EQ(rng.next_uint64(), 0x0a7d3da94ecde8b8ULL);
}

// r = np.random.default_rng(0); then, in this order:
// r.integers(0,163840,6), (5,6,2), (10240,10241,2), (256,513,5), (0,2**40,3),
// (-5,2**32-5,3), (0,2**63-1,2). One generator, so the 32-bit buffering
// between calls is exercised too.
TEST(NumpyRandom, IntegersMatchNumpyAcrossAllRangeKinds) {
  Pcg64 rng(0);
  EXPECT_EQ(integers(rng, 0, 163840, 6),
            (std::vector<int64_t>{139366, 104359, 83744, 44201, 50434, 6713}));
  EXPECT_EQ(integers(rng, 5, 6, 2), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(integers(rng, 10240, 10241, 2), (std::vector<int64_t>{10240, 10240}));
  EXPECT_EQ(integers(rng, 256, 513, 5), (std::vector<int64_t>{275, 260, 301, 465, 422}));
  EXPECT_EQ(integers(rng, 0, int64_t(1) << 40, 3),
            (std::vector<int64_t>{667003089280, 802089951224, 597721999265}));
  EXPECT_EQ(integers(rng, -5, (int64_t(1) << 32) - 5, 3),
            (std::vector<int64_t>{3920255348, 2404827112, 4016105474}));
  EXPECT_EQ(integers(rng, 0, INT64_MAX, 2),
            (std::vector<int64_t>{7524920857253125029, 25258205892266071}));
}

// np.random.default_rng(12345).integers(0, 3, size=10): a small range where
// Lemire's rejection step matters.
TEST(NumpyRandom, SmallRangeMatchesNumpy) {
  Pcg64 rng(12345);
  EXPECT_EQ(integers(rng, 0, 3, 10), (std::vector<int64_t>{2, 0, 2, 0, 0, 2, 1, 2, 2, 1}));
}

TEST(NumpyRandom, EmptyRangeIsAnInputError) {
  Pcg64 rng(0);
  EXPECT_THROW(integers(rng, 3, 3, 1), InvalidArgument);
}

}  // namespace mx::bench
