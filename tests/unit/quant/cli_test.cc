// The synth and inspect subcommands through the real binary: exit codes and
// what inspect reports. Skipped when mxserve has not been built yet.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct CommandResult {
  int rc;
  std::string out;
};

CommandResult run(const std::string& args) {
  std::string cmd = std::string(MX_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  return {WEXITSTATUS(status), out};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(MX_BINARY)) GTEST_SKIP() << "mxserve not built at " << MX_BINARY;
    dir_ = fs::temp_directory_path() / ("mx_cli_" + std::to_string(::getpid()));
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(CliTest, SynthThenInspect) {
  CommandResult synth = run("synth --out " + (dir_ / "k").string() + " --preset kimi-k25-mxfp4-old --seed 4");
  ASSERT_EQ(synth.rc, 0) << synth.out;
  EXPECT_TRUE(fs::exists(dir_ / "k" / "config.json"));
  CommandResult inspect = run("inspect --model " + (dir_ / "k").string());
  ASSERT_EQ(inspect.rc, 0) << inspect.out;
  for (const char* line : {"model_type: kimi_k25", "tensor prefix: language_model.", "MLA: q_lora 1536, kv_lora 512",
                           "quantization: quark mxfp4", "mxfp4: 48 linears", "bf16: 27 linears",
                           "skipped (vision_tower / mm_projector): 6"})
    EXPECT_NE(inspect.out.find(line), std::string::npos) << line << "\n" << inspect.out;
}

TEST_F(CliTest, BadInputExitsWithTwo) {
  CommandResult bad = run("synth --out " + (dir_ / "x").string() + " --preset gpt-oss");
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.out.find("unknown synth preset 'gpt-oss'"), std::string::npos) << bad.out;
  CommandResult missing = run("inspect --model " + (dir_ / "nothing").string());
  EXPECT_EQ(missing.rc, 2);
  EXPECT_NE(missing.out.find("nothing"), std::string::npos) << missing.out;
}

}  // namespace
