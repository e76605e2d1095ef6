// `mxserve perplexity`: teacher-forced perplexity of a model on a text file,
// on the CPU or CUDA backend. Each token is fed as one decode step over the paged KV
// cache (the engine's own path), and the next token's negative log-likelihood
// is taken from the F32 logits with a max-shifted log-sum-exp in double.
//   --model PATH      checkpoint directory or .gguf (default: the packaged default)
//   --text FILE       UTF-8 text, tokenized without special tokens; BOS is
//                     prepended when the tokenizer says so
//   --max-tokens N    score at most the first N tokens (0: all)
//   --w4a4            MXFP4 Linears quantize their inputs (W4A4); default W4A16
//   --threads N       CPU threads (0: all cores)
//   --device cpu|cuda the Ops backend (cuda: a -DMXSERVE_CUDA=ON build)
//   --print-ids       print the token ids that would be scored, and exit
// Prints one JSON object: tokens scored, mean NLL, perplexity, seconds.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/model_flags.h"
#include "cli/command.h"
#include "core/error.h"
#include "model/causal_lm.h"
#include "model/default_model.h"
#include "server/model_files.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

namespace fs = std::filesystem;

struct PerplexityOptions : ModelFlags {
  std::string model, text;
  int64_t max_tokens = 0;
  bool print_ids = false;
};

double next_token_nll(const std::vector<float>& logits, int32_t target) {
  float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - max);
  return std::log(sum) + max - double(logits[size_t(target)]);
}

void run(const PerplexityOptions& o) {
  std::ifstream in(o.text, std::ios::binary);
  if (!in) fail_input("--text {}: cannot read", o.text);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::path path = resolve_model_path(o.model);
  auto tok = load_model_tokenizer(path);
  std::vector<int32_t> ids;
  if (tok->add_bos() && tok->bos_id()) ids.push_back(*tok->bos_id());
  for (int32_t id : tok->encode(ss.str(), false)) ids.push_back(id);
  if (o.max_tokens > 0 && int64_t(ids.size()) > o.max_tokens) ids.resize(size_t(o.max_tokens));
  if (ids.size() < 2) fail_input("--text {}: needs at least 2 tokens", o.text);
  if (o.print_ids) {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
    return;
  }

  auto model = load_causal_lm(path, o.load_options());
  const int64_t block = o.device == "cpu" ? 16 : 64, n = int64_t(ids.size());
  model->allocate_kv_cache((n + block - 1) / block, block, KvCacheDtype::BF16);
  std::vector<int32_t> table(size_t((n + block - 1) / block));
  std::iota(table.begin(), table.end(), 0);

  auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  for (int64_t i = 0; i + 1 < n; ++i) {
    ForwardBatch b;
    b.token_ids = {ids[size_t(i)]};
    b.positions = {int32_t(i)};
    b.seqs.push_back({i, 1, table, true});
    nll += next_token_nll(model->forward(b).to_f32_vector(), ids[size_t(i + 1)]);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::ordered_json out = {
      {"model", path.string()},
      {"describe", model->describe()},
      {"activations", o.w4a4 ? "W4A4" : "W4A16"},
      {"device", o.device},
      {"text", o.text},
      {"tokens_scored", n - 1},
      {"mean_nll", nll / double(n - 1)},
      {"perplexity", std::exp(nll / double(n - 1))},
      {"seconds", secs},
  };
  std::printf("%s\n", out.dump().c_str());
}

Register reg([](CLI::App& app) {
  auto* cmd = app.add_subcommand("perplexity", "Teacher-forced perplexity of a model on a text file");
  auto o = std::make_shared<PerplexityOptions>();
  cmd->add_option("--model", o->model, "checkpoint directory or .gguf file (default: the packaged default model)");
  cmd->add_option("--text", o->text, "UTF-8 text file")->required();
  cmd->add_option("--max-tokens", o->max_tokens, "score at most this many tokens (0: all)")->check(CLI::NonNegativeNumber);
  o->add_to(cmd, /*parallel=*/false);
  cmd->add_flag("--print-ids", o->print_ids, "print the scored token ids (comma-separated) and exit");
  cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace mx::cli
