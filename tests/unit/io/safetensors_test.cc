#include "io/safetensors.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/safetensors_writer.h"
#include "io/tensor_source.h"

namespace mx {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mx_st_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes raw bytes: an 8-byte length, the header text, then `data`.
  fs::path write_raw(const std::string& header, const std::string& data, uint64_t claimed_len = 0) {
    fs::path p = dir_ / "model.safetensors";
    std::ofstream out(p, std::ios::binary);
    uint64_t n = claimed_len ? claimed_len : header.size();
    for (int i = 0; i < 8; ++i) out.put(char(n >> (8 * i)));
    out << header << data;
    return p;
  }

  // Expects open_safetensors to throw an mx::Error whose message has every needle.
  void expect_error(const fs::path& p, std::initializer_list<std::string> needles) {
    try {
      open_safetensors(p);
      FAIL() << "no error for " << p;
    } catch (const Error& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  }

  fs::path dir_;
};

NamedTensors sample_tensors() {
  Tensor a = Tensor::from_f32({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_f32({0.5f, -1.25f}, {2}).to(DType::BF16);
  Tensor c = Tensor::empty(DType::U8, {4, 2});
  for (int i = 0; i < 8; ++i) c.data<uint8_t>()[i] = uint8_t(i * 31);
  Tensor d = Tensor::empty(DType::I32, {3});
  d.data<int32_t>()[2] = -7;
  return {{"a", a}, {"b.weight", b}, {"c", c}, {"d", d}};
}

TEST_F(SafetensorsTest, RoundTripThroughWriter) {
  write_safetensors(dir_ / "model.safetensors", sample_tensors());
  auto src = open_safetensors(dir_);
  EXPECT_EQ(src->names(), (std::vector<std::string>{"a", "b.weight", "c", "d"}));
  Tensor a = src->get("a");
  EXPECT_EQ(a.describe(), "f32[2, 3]");
  EXPECT_EQ(a.to_f32_vector(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(src->get("b.weight").to_f32_vector(), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(src->get("c").data<uint8_t>()[7], uint8_t(7 * 31));
  EXPECT_EQ(src->get("d").data<int32_t>()[2], -7);
  EXPECT_FALSE(src->get("a").storage()->writable());  // a view of the mapping
  EXPECT_NE(src->file_of("a").find("model.safetensors"), std::string::npos);
}

TEST_F(SafetensorsTest, ViewsKeepTheMappingAlive) {
  write_safetensors(dir_ / "model.safetensors", sample_tensors());
  Tensor a;
  {
    auto src = open_safetensors(dir_ / "model.safetensors");
    a = src->get("a");
  }
  EXPECT_EQ(a.get_f32(5), 6.f);
}

TEST_F(SafetensorsTest, DataSectionIsAligned) {
  write_safetensors(dir_ / "x.safetensors", sample_tensors());
  std::ifstream in(dir_ / "x.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST_F(SafetensorsTest, ShardedIndex) {
  auto shards = write_safetensors_sharded(dir_, sample_tensors(), 20);
  EXPECT_GE(shards.size(), 2u);
  auto src = open_safetensors(dir_);
  EXPECT_EQ(src->names().size(), 4u);
  EXPECT_EQ(src->get("d").data<int32_t>()[2], -7);
  EXPECT_NE(src->file_of("a"), src->file_of("d"));
  // Opening the index file directly works too.
  EXPECT_TRUE(open_safetensors(dir_ / "model.safetensors.index.json")->has("c"));
}

TEST_F(SafetensorsTest, IndexNamingAMissingTensorIsAnError) {
  write_safetensors_sharded(dir_, sample_tensors(), 1 << 20);
  json index = {{"weight_map", {{"a", "model-00001-of-00001.safetensors"}, {"ghost", "model-00001-of-00001.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  expect_error(dir_, {"ghost", "model-00001-of-00001.safetensors"});
}

TEST_F(SafetensorsTest, IndexNamingAMissingShardIsAnError) {
  json index = {{"weight_map", {{"a", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << index.dump();
  expect_error(dir_, {"model-00002-of-00002.safetensors", "does not exist"});
}

TEST_F(SafetensorsTest, MissingTensorNamesIt) {
  write_safetensors(dir_ / "model.safetensors", sample_tensors());
  auto src = open_safetensors(dir_);
  try {
    src->get("model.layers.0.nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.nope"), std::string::npos);
  }
}

TEST_F(SafetensorsTest, TruncatedFile) {
  write_safetensors(dir_ / "model.safetensors", sample_tensors());
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 5);
  expect_error(dir_, {"model.safetensors", "'d'", "truncated"});
}

TEST_F(SafetensorsTest, FileShorterThanLengthField) {
  std::ofstream(dir_ / "model.safetensors") << "abc";
  expect_error(dir_, {"model.safetensors", "too short"});
}

TEST_F(SafetensorsTest, HeaderLengthBeyondFile) {
  auto p = write_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd", 1000);
  expect_error(p, {"header length 1000", "past the end"});
}

TEST_F(SafetensorsTest, HeaderLengthInsane) {
  auto p = write_raw("{}", "", uint64_t(1) << 40);
  expect_error(p, {"exceeds"});
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  auto p = write_raw(R"({"a": {"dtype": "F32", )", "abcd");
  expect_error(p, {"model.safetensors", "not valid JSON"});
}

TEST_F(SafetensorsTest, HeaderLiesAboutSize) {
  // 2x2 F32 needs 16 bytes; the offsets claim 12.
  auto p = write_raw(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(16, '\0'));
  expect_error(p, {"'w'", "needs 16 bytes", "hold 12"});
}

TEST_F(SafetensorsTest, OffsetsPastDataSection) {
  auto p = write_raw(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", std::string(16, '\0'));
  expect_error(p, {"'w'", "run past the data section of 16 bytes"});
}

TEST_F(SafetensorsTest, ReversedOffsets) {
  auto p = write_raw(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", std::string(16, '\0'));
  expect_error(p, {"'w'", "reversed"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  auto p = write_raw(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     std::string(12, '\0'));
  expect_error(p, {"'x'", "'y'", "overlap"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  auto p = write_raw(R"({"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", std::string(2, '\0'));
  expect_error(p, {"'w'", "Q4_K"});
}

TEST_F(SafetensorsTest, NegativeOrNonIntegerShape) {
  auto p = write_raw(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", "");
  expect_error(p, {"'w'", "non-negative"});
  p = write_raw(R"({"w":{"dtype":"U8","shape":["2"],"data_offsets":[0,2]}})", "ab");
  expect_error(p, {"'w'", "non-negative"});
}

TEST_F(SafetensorsTest, ShapeOverflowIsCaught) {
  auto p = write_raw(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,4]}})", "abcd");
  expect_error(p, {"'w'", "overflows"});
}

TEST_F(SafetensorsTest, MetadataIsIgnored) {
  auto p = write_raw(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})",
                     std::string("\x80\x3f\x00\x40", 4));
  auto src = open_safetensors(p);
  EXPECT_EQ(src->names(), (std::vector<std::string>{"w"}));
  EXPECT_EQ(src->get("w").to_f32_vector(), (std::vector<float>{1.f, 2.f}));
}

TEST_F(SafetensorsTest, F4CountsTwoElementsPerByte) {
  auto p = write_raw(R"({"w":{"dtype":"F4","shape":[2,4],"data_offsets":[0,4]}})", "\x21\x43\x65\x87");
  Tensor w = open_safetensors(p)->get("w");
  EXPECT_EQ(w.describe(), "e2m1x2[2, 2]");
  EXPECT_EQ(w.data<uint8_t>()[1], 0x43);
  // and back through the writer
  write_safetensors(dir_ / "f4.safetensors", {{"w", w}});
  EXPECT_EQ(open_safetensors(dir_ / "f4.safetensors")->get("w").shape(), (Shape{2, 2}));
}

TEST_F(SafetensorsTest, DuplicateNameAcrossUnindexedShards) {
  write_safetensors(dir_ / "a.safetensors", {{"x", Tensor::from_f32({1}, {1})}});
  write_safetensors(dir_ / "b.safetensors", {{"x", Tensor::from_f32({2}, {1})}});
  expect_error(dir_, {"'x'", "a.safetensors", "b.safetensors"});
}

TEST_F(SafetensorsTest, EmptyDirectory) { expect_error(dir_, {"no model.safetensors"}); }

}  // namespace
}  // namespace mx
