// GGUF container parsing: metadata of every type, tensor infos, alignment, and
// rejection of malformed files with a clear mx::InvalidArgument.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "gguf_test_util.h"

namespace mx {
namespace {

using testing::GgufBuilder;

std::string raw(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

GgufBuilder sample() {
  GgufBuilder b;
  b.kv_str("general.architecture", "llama");
  uint8_t u8 = 200;
  int8_t i8 = -5;
  uint16_t u16 = 60000;
  int16_t i16 = -3000;
  int32_t i32 = -70000;
  uint64_t u64 = 1ull << 40;
  int64_t i64 = -(1ll << 40);
  double f64 = 0.125;
  uint8_t yes = 1;
  b.kv_raw("t.u8", 0, raw(&u8, 1));
  b.kv_raw("t.i8", 1, raw(&i8, 1));
  b.kv_raw("t.u16", 2, raw(&u16, 2));
  b.kv_raw("t.i16", 3, raw(&i16, 2));
  b.kv_u32("t.u32", 4000000000u);
  b.kv_raw("t.i32", 5, raw(&i32, 4));
  b.kv_f32("t.f32", 1.5f);
  b.kv_raw("t.bool", 7, raw(&yes, 1));
  b.kv_raw("t.u64", 10, raw(&u64, 8));
  b.kv_raw("t.i64", 11, raw(&i64, 8));
  b.kv_raw("t.f64", 12, raw(&f64, 8));
  b.kv_strs("t.strs", {"a", "", "\xe2\x82"});  // partial UTF-8 survives as bytes
  b.kv_i32s("t.ints", {3, -1, 7});
  // Array of arrays of u8: [[1, 2], []]
  std::string nested;
  GgufBuilder::put_u32(nested, 9);
  GgufBuilder::put_u64(nested, 2);
  GgufBuilder::put_u32(nested, 0);
  GgufBuilder::put_u64(nested, 2);
  nested += "\x01\x02";
  GgufBuilder::put_u32(nested, 0);
  GgufBuilder::put_u64(nested, 0);
  b.kv_raw("t.nested", 9, nested);
  b.tensor("a", {4}, 0, testing::f32_bytes({1, 2, 3, 4}));
  b.tensor("b", {2, 3}, 0, testing::f32_bytes({1, 2, 3, 4, 5, 6}));
  return b;
}

TEST(Gguf, ReadsEveryMetadataType) {
  auto f = GgufFile::open(sample().write("types.gguf"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("t.u8"), 200);
  EXPECT_EQ(f->get_int("t.i8"), -5);
  EXPECT_EQ(f->get_int("t.u16"), 60000);
  EXPECT_EQ(f->get_int("t.i16"), -3000);
  EXPECT_EQ(f->get_int("t.u32"), 4000000000ll);
  EXPECT_EQ(f->get_int("t.i32"), -70000);
  EXPECT_EQ(f->get_float("t.f32"), 1.5);
  EXPECT_TRUE(f->get_bool_or("t.bool", false));
  EXPECT_EQ(f->get_int("t.u64"), 1ll << 40);
  EXPECT_EQ(f->get_int("t.i64"), -(1ll << 40));
  EXPECT_EQ(f->get_float("t.f64"), 0.125);
  EXPECT_EQ(f->get_strings("t.strs"), (std::vector<std::string>{"a", "", "\xe2\x82"}));
  EXPECT_EQ(f->get_ints("t.ints"), (std::vector<int64_t>{3, -1, 7}));
  const GgufKv* nested = f->find("t.nested");
  ASSERT_NE(nested, nullptr);
  EXPECT_EQ(nested->array_type, GgufType::ARRAY);
  EXPECT_EQ(nested->value.dump(), "[[1,2],[]]");
  EXPECT_EQ(f->keys().size(), 15u);
  EXPECT_EQ(f->keys().front(), "general.architecture");
}

TEST(Gguf, TypedGettersNameTheKey) {
  auto f = GgufFile::open(sample().write("getters.gguf"));
  EXPECT_EQ(f->get_int_or("missing", 7), 7);
  try {
    f->get_int("general.architecture");
    FAIL() << "expected a type error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'general.architecture' is not an integer"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->get_string("missing.key"), InvalidArgument);
  EXPECT_THROW(f->get_strings("t.ints"), InvalidArgument);
}

TEST(Gguf, TensorInfosAndDataOffsets) {
  auto f = GgufFile::open(sample().write("tensors.gguf"));
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensorInfo* b = f->find_tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->ne, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->shape(), (Shape{3, 2}));
  EXPECT_EQ(b->nbytes, 24u);
  EXPECT_EQ(b->offset, 32u);  // after "a" padded to the 32-byte alignment
  EXPECT_EQ(f->data_offset() % 32, 0u);
  float v[6];
  std::memcpy(v, f->data(*b), 24);
  EXPECT_EQ(v[5], 6.f);
  EXPECT_EQ(f->raw_bytes(*b).nbytes(), 24u);
}

TEST(Gguf, HonoursGeneralAlignment) {
  GgufBuilder b = sample();
  b.alignment = 256;
  b.kv_u32("general.alignment", 256);
  auto f = GgufFile::open(b.write("align.gguf"));
  EXPECT_EQ(f->alignment(), 256u);
  EXPECT_EQ(f->data_offset() % 256, 0u);
  EXPECT_EQ(f->find_tensor("b")->offset, 256u);
  float v[4];
  std::memcpy(v, f->data(*f->find_tensor("b")), 16);
  EXPECT_EQ(v[3], 4.f);
}

TEST(Gguf, IsGgufFileChecksTheMagic) {
  EXPECT_TRUE(is_gguf_file(sample().write("magic_ok.gguf")));
  EXPECT_FALSE(is_gguf_file(GgufBuilder::write_bytes("not.gguf", "{\"a\": 1}")));
  EXPECT_FALSE(is_gguf_file("/nonexistent/x.gguf"));
}

// ---- malformed files: each must raise InvalidArgument with a clear reason ----

void expect_rejected(const std::string& bytes, const std::string& name, const std::string& reason) {
  auto path = GgufBuilder::write_bytes(name, bytes);
  try {
    GgufFile::open(path);
    FAIL() << name << ": expected rejection mentioning '" << reason << "'";
  } catch (const InvalidArgument& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(reason), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find(path.string()), std::string::npos) << "message names the file: " << msg;
  }
}

TEST(GgufMalformed, BadMagic) {
  GgufBuilder b = sample();
  b.magic = 0x46554746;
  expect_rejected(b.bytes(), "magic.gguf", "bad magic");
  expect_rejected("", "empty.gguf", "bad magic");
}

TEST(GgufMalformed, UnsupportedVersion) {
  GgufBuilder b = sample();
  b.version = 2;
  expect_rejected(b.bytes(), "v2.gguf", "version 2 is not supported");
}

TEST(GgufMalformed, EveryTruncationIsRejected) {
  std::string full = sample().bytes();
  // Cutting anywhere before the last tensor's data ends must fail cleanly.
  size_t data_end = full.size() - (32 - 24);  // "b" is 24 bytes, padded to 32
  for (size_t n = 0; n < data_end; n += (n < 600 ? 1 : 7)) {
    auto path = GgufBuilder::write_bytes("trunc.gguf", full.substr(0, n));
    EXPECT_THROW(GgufFile::open(path), InvalidArgument) << "truncated to " << n << " bytes";
  }
  expect_rejected(full.substr(0, full.size() - 20), "trunc_data.gguf", "outside the file");
}

TEST(GgufMalformed, TensorOffsetOutOfRange) {
  GgufBuilder b = sample();
  b.tensors[1].offset_override = 1ull << 50;
  expect_rejected(b.bytes(), "offset.gguf", "outside the file");
  b.tensors[1].offset_override = 64;  // aligned but the data section is 64 bytes long
  expect_rejected(b.bytes(), "offset2.gguf", "outside the file");
  b.tensors[1].offset_override = 8;
  expect_rejected(b.bytes(), "unaligned.gguf", "not a multiple of the alignment");
}

TEST(GgufMalformed, UnknownOrUnsupportedTensorType) {
  GgufBuilder b = sample();
  b.tensors[0].type = 12;  // Q4_K: known to ggml, not read here
  expect_rejected(b.bytes(), "q4k.gguf", "Q4_K (12)");
  b.tensors[0].type = 1000;
  expect_rejected(b.bytes(), "unknown_type.gguf", "unknown type 1000");
}

TEST(GgufMalformed, AbsurdCounts) {
  std::string head;
  GgufBuilder::put_u32(head, 0x46554747);
  GgufBuilder::put_u32(head, 3);
  std::string many_tensors = head;
  GgufBuilder::put_u64(many_tensors, 1ull << 60);
  GgufBuilder::put_u64(many_tensors, 0);
  expect_rejected(many_tensors, "many_tensors.gguf", "absurd tensor count");
  std::string many_kv = head;
  GgufBuilder::put_u64(many_kv, 0);
  GgufBuilder::put_u64(many_kv, 1ull << 62);
  expect_rejected(many_kv, "many_kv.gguf", "absurd metadata count");

  GgufBuilder huge_array;
  std::string arr;
  GgufBuilder::put_u32(arr, 8);
  GgufBuilder::put_u64(arr, 1ull << 61);
  huge_array.kv_raw("tokens", 9, arr);
  expect_rejected(huge_array.bytes(), "huge_array.gguf", "cannot fit");

  GgufBuilder huge_string;
  std::string s;
  GgufBuilder::put_u64(s, ~0ull);
  huge_string.kv_raw("name", 8, s);
  expect_rejected(huge_string.bytes(), "huge_string.gguf", "runs past the end");

  GgufBuilder dims = sample();
  dims.tensors[0].ne = {1, 1, 1, 1, 4};
  expect_rejected(dims.bytes(), "dims.gguf", "5 dimensions");
  dims.tensors[0].ne = {0};
  expect_rejected(dims.bytes(), "zero_dim.gguf", "absurd dimension 0");
  dims.tensors[0].ne = {1ull << 30, 1ull << 30};
  expect_rejected(dims.bytes(), "big_dims.gguf", "absurd dimension");
}

TEST(GgufMalformed, BadMetadata) {
  GgufBuilder type;
  type.kv_raw("k", 13, "");
  expect_rejected(type.bytes(), "kv_type.gguf", "unknown value type 13");
  GgufBuilder dup;
  dup.kv_u32("k", 1);
  dup.kv_u32("k", 2);
  expect_rejected(dup.bytes(), "dup.gguf", "appears twice");
  GgufBuilder align = sample();
  align.kv_u32("general.alignment", 24);
  expect_rejected(align.bytes(), "align24.gguf", "not a power of two");
  GgufBuilder deep;
  std::string v;
  for (int i = 0; i < 4; ++i) {
    GgufBuilder::put_u32(v, 9);
    GgufBuilder::put_u64(v, 1);
  }
  GgufBuilder::put_u32(v, 0);
  GgufBuilder::put_u64(v, 0);
  deep.kv_raw("deep", 9, v);
  expect_rejected(deep.bytes(), "deep.gguf", "nested deeper");
  GgufBuilder blocks;
  blocks.tensor("q", {40}, 8, std::string(34, '\0'));  // Q8_0 row of 40 is not whole blocks
  expect_rejected(blocks.bytes(), "blocks.gguf", "not a multiple of the Q8_0 (8) block size 32");
}

TEST(GgufMalformed, MissingFile) {
  EXPECT_THROW(GgufFile::open("/nonexistent/model.gguf"), InvalidArgument);
}

}  // namespace
}  // namespace mx

#include "io/gguf_writer.h"

namespace mx {
namespace {

TEST(GgufWriter, MetadataRoundTripKeepsTypesAndValues) {
  auto src = GgufFile::open(sample().write("writer_src.gguf"));
  auto out = std::filesystem::temp_directory_path() / "mx_gguf_test" / "writer_out.gguf";
  write_gguf_metadata(out, *src, [](const std::string& k) { return k != "t.nested" && k != "t.u8"; });
  auto back = GgufFile::open(out);
  EXPECT_EQ(back->tensors().size(), 0u);
  ASSERT_EQ(back->keys().size(), src->keys().size() - 2);
  for (const auto& key : back->keys()) {
    EXPECT_EQ(back->find(key)->type, src->find(key)->type) << key;
    EXPECT_EQ(back->find(key)->value, src->find(key)->value) << key;
  }
  EXPECT_EQ(back->find("t.ints")->array_type, GgufType::I32);
  EXPECT_EQ(back->find("t.u8"), nullptr);
  EXPECT_THROW(write_gguf_metadata(out, *src, [](const std::string&) { return true; }), Error);  // nested array
}

TEST(GgufWriter, ChatTemplateWithBosEosStrings) {
  GgufBuilder b;
  b.kv_strs("tokenizer.ggml.tokens", {"<s>", "</s>", "x"});
  b.kv_u32("tokenizer.ggml.bos_token_id", 0);
  b.kv_u32("tokenizer.ggml.eos_token_id", 1);
  b.kv_str("tokenizer.chat_template", "{{ bos_token }}{{ messages[0]['content'] }}");
  auto t = gguf_chat_template(*GgufFile::open(b.write("tmpl.gguf")));
  EXPECT_EQ(t.source, "{{ bos_token }}{{ messages[0]['content'] }}");
  EXPECT_EQ(t.bos_token, "<s>");
  EXPECT_EQ(t.eos_token, "</s>");
  EXPECT_EQ(gguf_chat_template(*GgufFile::open(sample().write("notmpl.gguf"))).source, "");
}

}  // namespace
}  // namespace mx
