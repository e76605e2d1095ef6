// `mxserve generate` end to end: the printed continuation equals the golden
// greedy continuation, and bad arguments give exit code 2 with a message.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <memory>

#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/default_model.h"
#include "model_test_util.h"

namespace mx {
namespace {

struct CliResult {
  int exit_code;
  std::string out;
};

CliResult run_generate(const std::string& args) {
  std::string cmd = std::string("'") + MX_BINARY + "' generate " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  std::array<char, 4096> buf{};
  while (size_t n = fread(buf.data(), 1, buf.size(), p.get())) out.append(buf.data(), n);
  int status = pclose(p.release());
  return {WEXITSTATUS(status), out};
}

TEST(GenerateCli, PrintsTheGoldenGreedyContinuationAndThroughput) {
  std::ifstream f(std::string(MX_SOURCE_DIR) + "/tests/golden/kimi-k25-mxfp4-w4a4.json");
  const nlohmann::json g = nlohmann::json::parse(f);
  const auto& p = g["prompts"][0];
  std::string ids, want;
  for (int id : p["ids"]) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  for (int id : p["greedy"]) want += (want.empty() ? "" : ",") + std::to_string(id);
  auto dir = test::synth_checkpoint("kimi-k25-mxfp4", 1);
  CliResult r = run_generate("--model '" + dir.string() + "' --prompt-ids " + ids + " --max-tokens " +
              std::to_string(p["greedy"].size()) + " --w4a4 --kv-cache-dtype f32 --ignore-eos --threads 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find(want + "\n"), std::string::npos) << "expected " << want << " in:\n" << r.out;
  EXPECT_NE(r.out.find("generation: 7 tokens in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokens/s"), std::string::npos) << r.out;
}

TEST(GenerateCli, BadArgumentsExitWithCode2AndAMessage) {
  auto dir = test::synth_checkpoint("llama", 1);
  CliResult ids = run_generate("--model '" + dir.string() + "' --prompt-ids 1,x,3");
  EXPECT_EQ(ids.exit_code, 2);
  EXPECT_NE(ids.out.find("'x' is not a token id"), std::string::npos) << ids.out;
  CliResult kv = run_generate("--model '" + dir.string() + "' --prompt-ids 1 --kv-cache-dtype int3");
  EXPECT_EQ(kv.exit_code, 2);
  EXPECT_NE(kv.out.find("--kv-cache-dtype 'int3'"), std::string::npos) << kv.out;
  CliResult vocab = run_generate("--model '" + dir.string() + "' --prompt-ids 1,99999");
  EXPECT_EQ(vocab.exit_code, 2);
  EXPECT_NE(vocab.out.find("outside the vocabulary"), std::string::npos) << vocab.out;
}

// The packaged SmolLM2-135M-Instruct GGUF (Q4_1) through the Llama model, the
// GGUF loader and the tokenizer: a real model must answer a factual prompt.
TEST(GenerateCli, DefaultModelAnswersAFactualPrompt) {
  try {
    resolve_default_model();
  } catch (const InvalidArgument& e) {
    GTEST_SKIP() << "default model not installed (scripts/setup_default_model.sh): " << e.what();
  }
  CliResult r = run_generate("--prompt 'The capital of France is' --max-tokens 3 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("text:  Paris"), std::string::npos) << r.out;
}

TEST(GenerateCli, NeedsExactlyOnePromptOption) {
  auto dir = test::synth_checkpoint("llama", 1);
  CliResult none = run_generate("--model '" + dir.string() + "'");
  EXPECT_EQ(none.exit_code, 2) << none.out;
  CliResult both = run_generate("--model '" + dir.string() + "' --prompt-ids 1 --prompt hi");
  EXPECT_EQ(both.exit_code, 2) << both.out;
  EXPECT_NE(both.out.find("exactly one of --prompt-ids and --prompt"), std::string::npos) << both.out;
}

}  // namespace
}  // namespace mx
