// A GGUF checkpoint seen through the engine's contracts: a TensorSource with
// Hugging Face Llama tensor names and engine formats, and a ModelConfig built
// from the llama.* metadata keys.
//
// Conversions on load (get()):
//   F32 / F16 / BF16      -> the same dtype (a view of the mapping when no row
//                            permutation is needed)
//   Q4_0 / Q4_1 / Q8_0    -> BF16 dense, dequantized
//   MXFP4                 -> "X.weight" U8 [out, in/2] (element 2j low nibble) and
//                            "X.weight_scale" U8 E8M0 [out, in/32]: the Quark layout,
//                            bit-exact (only nibble positions move)
// Names: token_embd -> model.embed_tokens, output_norm -> model.norm, output ->
// lm_head, blk.N.{attn_q,attn_k,attn_v,attn_output} -> model.layers.N.self_attn.
// {q,k,v,o}_proj, blk.N.{ffn_gate,ffn_up,ffn_down} -> ...mlp.{gate,up,down}_proj,
// blk.N.attn_norm -> input_layernorm, blk.N.ffn_norm -> post_attention_layernorm.
// Tensors with other names stay reachable under their GGUF name.
//
// llama.cpp's converter permutes the rows of attn_q / attn_k (and their
// biases) head by head so that RoPE can rotate adjacent pairs: within a head of
// size D, GGUF row 2i+j holds HF row j*D/2+i. get() undoes that so the HF-layout
// Llama model (rotate_half RoPE) runs the weights unchanged.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/model_config.h"
#include "io/tensor_source.h"

namespace mx {

// The HF name of a llama.cpp tensor name, or "" when it has no HF counterpart.
std::string hf_name_from_gguf(const std::string& gguf_name);

std::unique_ptr<TensorSource> open_gguf(const std::filesystem::path& file);
std::unique_ptr<TensorSource> open_gguf(std::shared_ptr<const GgufFile> file);

// From general.architecture == "llama" and the llama.* keys; bos/eos from
// tokenizer.ggml.*; tie_word_embeddings when the file has no output.weight;
// a Quark quantization_config when any Linear is stored as MXFP4. Throws
// mx::InvalidArgument naming the file and key for other architectures or
// missing/ill-typed keys.
ModelConfig gguf_model_config(const GgufFile& file);
ModelConfig load_gguf_model_config(const std::filesystem::path& file);

// The quantization_config of a Quark OCP-MXFP4 export, field for field as in
// amd/Kimi-K2.5-MXFP4 (kimi-k2.5.md 2.2): weights fp4 per_group 32 e8m0 static;
// input_tensors the same spec with is_dynamic true when activations_mxfp4
// (W4A4), null otherwise (W4A16).
nlohmann::json quark_mxfp4_quantization_config(const std::vector<std::string>& exclude, bool activations_mxfp4);

}  // namespace mx
