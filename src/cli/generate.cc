// `mxserve generate`: greedy continuation of a prompt.
//   --model PATH          checkpoint directory (config.json + safetensors) or a
//                         .gguf file; default: the packaged default model
//   --prompt-ids 1,2,3    prompt token ids, or
//   --prompt TEXT         a prompt encoded with the model's tokenizer (BOS added
//                         when the tokenizer says so); the continuation is then
//                         also printed as text
//   --max-tokens N        tokens to generate (default 16)
//   --w4a4                MXFP4 Linears quantize their inputs (the checkpoint's
//                         contract); default W4A16
//   --kv-cache-dtype      bf16 (default), fp8, f32
//   --threads N           CPU threads (default: all cores)
//   --device cpu|cuda     the Ops backend (cuda: a -DMXSERVE_CUDA=ON build)
//   --block-size N        KV block size (default 16 on cpu, 64 on cuda)
// Prints the continuation ids, [its text,] then prompt and generation throughput.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/model_flags.h"
#include "cli/command.h"
#include "core/error.h"
#include "model/causal_lm.h"
#include "model/default_model.h"
#include "model/greedy.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

struct GenerateOptions : ModelFlags {
  std::string model;
  std::string prompt_ids;
  std::string prompt_text;
  int64_t max_tokens = 16;
  std::string kv_dtype = "bf16";
  int64_t block_size = 0;  // 0: 16 on cpu, 64 on cuda
  bool ignore_eos = false;
  std::string logits_out;  // JSON: tokens + the logits that chose each (parity checks)
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      fail_input("--prompt-ids: '{}' is not a token id (expected comma-separated non-negative integers)", item);
    }
  }
  if (ids.empty()) fail_input("--prompt-ids is empty");
  return ids;
}

KvCacheDtype parse_kv_dtype(const std::string& s) {
  if (s == "bf16" || s == "auto") return KvCacheDtype::BF16;
  if (s == "fp8") return KvCacheDtype::FP8;
  if (s == "f32") return KvCacheDtype::F32;
  fail_input("--kv-cache-dtype '{}': expected bf16, fp8 or f32", s);
}

std::string join(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

void run(const GenerateOptions& o) {
  if (o.prompt_ids.empty() == o.prompt_text.empty()) fail_input("give exactly one of --prompt-ids and --prompt");
  const auto path = resolve_model_path(o.model);
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  if (!o.prompt_text.empty()) {
    tokenizer = load_tokenizer(path);
    if (tokenizer->add_bos() && tokenizer->bos_id()) prompt.push_back(*tokenizer->bos_id());
    for (int32_t id : tokenizer->encode(o.prompt_text, false)) prompt.push_back(id);
  } else {
    prompt = parse_ids(o.prompt_ids);
  }
  auto model = load_causal_lm(path, o.load_options());
  GreedyOptions g;
  g.max_new_tokens = o.max_tokens;
  g.block_size = o.block_size > 0 ? o.block_size : o.device == "cpu" ? 16 : 64;
  g.kv_dtype = parse_kv_dtype(o.kv_dtype);
  if (!o.ignore_eos) g.stop_ids = model->config().eos_token_ids;
  GreedyResult r = greedy_generate(*model, prompt, g);
  if (!o.logits_out.empty()) {
    std::ofstream f(o.logits_out);
    f << nlohmann::json{{"tokens", r.tokens}, {"prompt_logits", r.prompt_logits}, {"step_logits", r.step_logits}};
    if (!f) fail_input("--logits-out {}: cannot write", o.logits_out);
  }
  std::printf("%s\n", join(r.tokens).c_str());
  if (tokenizer) std::printf("text: %s\n", tokenizer->decode(r.tokens, true).c_str());
  std::printf("prompt: %zu tokens in %.3f s (%.2f tokens/s)\n", prompt.size(), r.prompt_seconds,
              double(prompt.size()) / r.prompt_seconds);
  // The first generated token comes from the prefill; the rest are decode steps.
  const size_t decoded = r.tokens.empty() ? 0 : r.tokens.size() - 1;
  std::printf("generation: %zu tokens in %.3f s (%.2f tokens/s)\n", decoded, r.decode_seconds,
              decoded ? double(decoded) / r.decode_seconds : 0.0);
}

Register reg([](CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Greedy continuation of a prompt (token ids or text)");
  auto o = std::make_shared<GenerateOptions>();
  cmd->add_option("--model", o->model, "checkpoint directory or .gguf file (default: the packaged default model)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "comma-separated prompt token ids");
  cmd->add_option("--prompt", o->prompt_text, "prompt text, encoded with the model's tokenizer");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens to generate")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-cache-dtype", o->kv_dtype, "bf16, fp8 or f32");
  cmd->add_option("--block-size", o->block_size, "KV cache block size in tokens (default: 16 on cpu, 64 on cuda)")
      ->check(CLI::PositiveNumber);
  o->add_to(cmd, /*parallel=*/true);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "do not stop at the model's EOS ids");
  cmd->add_option("--logits-out", o->logits_out, "write the tokens and the logits that chose them as JSON (parity checks)");
  cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace mx::cli
