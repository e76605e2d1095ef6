// `mxserve quantize`: a BF16/F16/F32 safetensors checkpoint or a GGUF file to
// a Quark-format OCP-MXFP4 checkpoint the engine serves (docs/default-model.md).
//   --in DIR_OR_GGUF        source; default: the packaged default model
//   --out DIR               written: config.json (+ quantization_config),
//                           model.safetensors, tokenizer files
//   --format mxfp4          the only format
//   --exclude PATTERN       more layers to keep in their dtype (Quark syntax:
//                           exact layer name, or "re:" + regex matched at the start)
//   --no-default-excludes   quantize what the defaults keep (see kDefaultExcludes)
//   --activations mxfp4|none  the checkpoint's input_tensors spec: mxfp4 (dynamic
//                           per-32 activation quantization, W4A4, as amd/Kimi-K2.5-
//                           MXFP4) or none (W4A16)
// Each quantized Linear X becomes X.weight U8 [out, in/2] (element 2j in the
// low nibble) and X.weight_scale U8 E8M0 [out, in/32], computed by the
// reference block quantizer of quant/mxfp4.h: per 32 weights along K, amax
// rounded up to the next power of two when its mantissa is >= 1.75, scale
// exponent floor(log2 amax') - 2 (clamped to [-127, 127]), codes x / 2^e
// rounded half-to-even to E2M1, saturating at +-6: the same rule as the W4A4
// activation quantizer (Quark scale_calculation_mode "even").
#include <filesystem>
#include <fstream>
#include <regex>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "io/gguf_source.h"
#include "io/gguf_writer.h"
#include "io/model_config.h"
#include "io/safetensors_writer.h"
#include "io/tensor_source.h"
#include "model/default_model.h"
#include "quant/mxfp4.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;

// The exclusions of amd/Kimi-K2.5-MXFP4 (kimi-k2.5.md 2.2): lm_head,
// embeddings, attention, the MoE router gate, vision parts.
const std::vector<std::string> kDefaultExcludes = {
    "lm_head", "re:.*embed_tokens.*", "re:.*self_attn.*", "re:.*\\.gate$", "re:.*vision_tower.*", "re:.*mm_projector.*",
};

struct QuantizeOptions {
  std::string in, out, format = "mxfp4", activations = "mxfp4";
  std::vector<std::string> excludes;
  bool no_default_excludes = false;
};

// Quark's matching: "re:" entries with Python re.match (anchored at the start
// only), others by equality with the layer name.
class ExcludeList {
 public:
  explicit ExcludeList(std::vector<std::string> entries) : entries_(std::move(entries)) {
    for (const auto& e : entries_) {
      if (e.rfind("re:", 0) != 0) continue;
      try {
        regexes_.emplace_back(e.substr(3), std::regex::ECMAScript);
      } catch (const std::regex_error& err) {
        fail_input("--exclude '{}': not a valid regular expression: {}", e, err.what());
      }
    }
  }
  bool matches(const std::string& layer) const {
    for (const auto& e : entries_)
      if (e.rfind("re:", 0) != 0 && e == layer) return true;
    for (const auto& r : regexes_)
      if (std::regex_search(layer, r, std::regex_constants::match_continuous)) return true;
    return false;
  }
  const std::vector<std::string>& entries() const { return entries_; }

 private:
  std::vector<std::string> entries_;
  std::vector<std::regex> regexes_;
};

struct Source {
  fs::path path;
  std::shared_ptr<const GgufFile> gguf;  // null for safetensors
  ModelConfig config;
  ordered_json config_json;  // what config.json will hold, without quantization_config
  std::unique_ptr<TensorSource> tensors;
};

// A HF LlamaForCausalLM config.json for a GGUF's llama.* metadata.
ordered_json hf_llama_config(const ModelConfig& c) {
  ordered_json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"vocab_size", c.vocab_size},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", false},
      {"torch_dtype", "bfloat16"},
  };
  if (!c.bos_token_ids.empty()) j["bos_token_id"] = c.bos_token_ids.front();
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids.front();
  if (!c.rope_scaling.type.empty())
    j["rope_scaling"] = {{"rope_type", c.rope_scaling.type},
                         {"factor", c.rope_scaling.factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  return j;
}

Source open_source(const fs::path& in) {
  Source s;
  s.path = in;
  if (is_gguf_file(in)) {
    s.gguf = GgufFile::open(in);
    s.config = gguf_model_config(*s.gguf);
    s.config_json = hf_llama_config(s.config);
    s.tensors = open_gguf(s.gguf);
    return s;
  }
  if (!fs::is_directory(in)) fail_input("--in {}: neither a GGUF file nor a checkpoint directory", in.string());
  s.config = load_model_config(in);
  if (!s.config.quantization_config.is_null())
    fail_input("--in {}: already quantized (quant_method '{}'); quantize reads BF16/F16/F32 checkpoints or GGUF files",
               in.string(), s.config.quantization_config.value("quant_method", "?"));
  std::ifstream f(in / "config.json");
  s.config_json = ordered_json::parse(f);
  s.tensors = open_safetensors(in);
  return s;
}

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct Plan {
  NamedTensors tensors;
  int64_t quantized = 0, kept = 0, already_mxfp4 = 0;
};

// Walks every tensor: quantizes the Linears that are not excluded, keeps the
// rest as stored (GGUF block formats arrive dequantized to BF16).
Plan quantize_tensors(const TensorSource& src, const ExcludeList& exclude) {
  Plan plan;
  for (const auto& name : src.names()) {
    if (ends_with(name, ".weight_scale")) continue;  // travels with its .weight
    Tensor t = src.get(name);
    std::string layer = ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : "";
    if (!layer.empty() && src.has(name + "_scale")) {  // MXFP4 already (GGUF MXFP4)
      plan.tensors.emplace_back(name, t);
      plan.tensors.emplace_back(name + "_scale", src.get(name + "_scale"));
      ++plan.already_mxfp4;
      continue;
    }
    bool linear = !layer.empty() && t.ndim() == 2 && is_float(t.dtype()) && t.dim(1) % kMxfp4Block == 0;
    if (!linear || exclude.matches(layer)) {
      plan.tensors.emplace_back(name, t);
      ++plan.kept;
      continue;
    }
    std::vector<float> w = t.to_f32_vector();
    Mxfp4Matrix q = mxfp4_quantize_matrix(w.data(), t.dim(0), t.dim(1));
    plan.tensors.emplace_back(name, q.weight);
    plan.tensors.emplace_back(layer + ".weight_scale", q.scale);
    ++plan.quantized;
  }
  return plan;
}

void write_json(const fs::path& path, const ordered_json& j) {
  std::ofstream f(path);
  f << j.dump(2) << "\n";
  if (!f) fail("cannot write {}", path.string());
}

// Tokenizer files next to the weights so the engine serves the directory.
void copy_tokenizer(const Source& s, const fs::path& out) {
  if (s.gguf) {
    write_gguf_metadata(out / "tokenizer.gguf", *s.gguf, [](const std::string& k) {
      return k.rfind("tokenizer.", 0) == 0 || k == "general.architecture" || k == "general.name";
    });
    GgufChatTemplateSource t = gguf_chat_template(*s.gguf);
    ordered_json cfg = {{"bos_token", t.bos_token}, {"eos_token", t.eos_token},
                        {"add_bos_token", s.gguf->get_bool_or("tokenizer.ggml.add_bos_token", false)}};
    if (!t.source.empty()) cfg["chat_template"] = t.source;
    write_json(out / "tokenizer_config.json", cfg);
    return;
  }
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "tiktoken.model", "chat_template.jinja",
                           "special_tokens_map.json", "generation_config.json", "tokenizer.model"})
    if (fs::exists(s.path / name)) fs::copy_file(s.path / name, out / name, fs::copy_options::overwrite_existing);
  for (const auto& e : fs::directory_iterator(s.path))  // Kimi ships tokenization_kimi.py
    if (e.path().extension() == ".py")
      fs::copy_file(e.path(), out / e.path().filename(), fs::copy_options::overwrite_existing);
}

void run_quantize(const QuantizeOptions& o) {
  if (o.format != "mxfp4") fail_input("--format {}: only mxfp4 is supported", o.format);
  if (o.activations != "mxfp4" && o.activations != "none")
    fail_input("--activations {}: use mxfp4 (W4A4 contract) or none (W4A16)", o.activations);
  fs::path in = resolve_model_path(o.in);
  fs::path out(o.out);
  if (fs::exists(out) && !fs::is_directory(out)) fail_input("--out {} exists and is not a directory", o.out);
  fs::create_directories(out);

  std::vector<std::string> entries = o.no_default_excludes ? std::vector<std::string>{} : kDefaultExcludes;
  entries.insert(entries.end(), o.excludes.begin(), o.excludes.end());
  ExcludeList exclude(entries);

  Source src = open_source(in);
  Plan plan = quantize_tensors(*src.tensors, exclude);
  if (plan.quantized + plan.already_mxfp4 == 0)
    log::warn("no Linear was quantized: every candidate matched an exclude pattern");

  size_t bytes = 0;
  for (const auto& [name, t] : plan.tensors) bytes += t.nbytes();
  constexpr size_t kShard = size_t(4) << 30;
  if (bytes <= kShard)
    write_safetensors(out / "model.safetensors", plan.tensors);
  else
    write_safetensors_sharded(out, plan.tensors, kShard);

  ordered_json cfg = src.config_json;
  if (cfg.contains("text_config") && cfg["text_config"].is_object()) cfg["text_config"].erase("quantization_config");
  cfg["quantization_config"] = quark_mxfp4_quantization_config(exclude.entries(), o.activations == "mxfp4");
  write_json(out / "config.json", cfg);
  copy_tokenizer(src, out);
  log::info("quantize: {} Linears to MXFP4 ({} were MXFP4 already), {} tensors kept; {:.1f} MB of weights in {}",
            plan.quantized, plan.already_mxfp4, plan.kept, double(bytes) / 1e6, out.string());
}

Register reg([](CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  auto* cmd = app.add_subcommand("quantize", "Write a Quark-format MXFP4 checkpoint from a BF16 checkpoint or a GGUF file");
  cmd->add_option("--in", o->in, "checkpoint directory or .gguf file (default: the packaged default model)");
  cmd->add_option("--out", o->out, "output directory")->required();
  cmd->add_option("--format", o->format, "output format (mxfp4)");
  cmd->add_option("--exclude", o->excludes,
                  "layer to keep unquantized: exact name or 're:REGEX' matched at the start (repeatable)");
  cmd->add_flag("--no-default-excludes", o->no_default_excludes,
                "do not apply the default exclusions (lm_head, embeddings, self_attn, router gate, vision)");
  cmd->add_option("--activations", o->activations,
                  "activation spec written to the checkpoint: mxfp4 (W4A4 contract, default) or none (W4A16)");
  cmd->callback([o] { run_quantize(*o); });
});

}  // namespace
}  // namespace mx::cli
