#include "model_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include <fmt/format.h>

namespace mx::test {

std::filesystem::path synth_checkpoint(const std::string& preset, uint64_t seed) {
  static std::mutex mu;
  static std::map<std::string, std::filesystem::path> made;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = fmt::format("{}-{}", preset, seed);
  if (auto it = made.find(key); it != made.end()) return it->second;
  auto dir = std::filesystem::temp_directory_path() / fmt::format("mx-model-test-{}-{}", ::getpid(), key);
  std::string cmd = fmt::format("'{}' synth --out '{}' --preset {} --seed {} > /dev/null", MX_BINARY, dir.string(),
                                preset, seed);
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
  made[key] = dir;
  return dir;
}

std::filesystem::path with_config_override(const std::filesystem::path& dir, const std::string& name,
                                           const nlohmann::json& override) {
  auto out = std::filesystem::path(dir.string() + "-" + name);
  std::filesystem::create_directories(out);
  std::filesystem::copy_file(dir / "model.safetensors", out / "model.safetensors",
                             std::filesystem::copy_options::overwrite_existing);
  std::ifstream in(dir / "config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  nlohmann::json& target = config.contains("text_config") ? config["text_config"] : config;
  target.merge_patch(override);
  std::ofstream(out / "config.json") << config.dump(2);
  return out;
}

std::string checkpoint_checksum(const std::filesystem::path& dir) {
  uint64_t total = 0;
  for (const char* name : {"config.json", "model.safetensors"}) {
    std::ifstream f(dir / name, std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    uint64_t s = 0;
    for (size_t i = 0; i < bytes.size(); ++i) s += uint64_t(bytes[i]) * (1 + i % 65521);
    total = total * 1000003u + s + bytes.size();
  }
  return fmt::format("{:016x}", total);
}

std::unique_ptr<CausalLM> load(const std::filesystem::path& dir, ActivationMode mode) {
  LoadOptions o;
  o.activation_mode = mode;
  return load_causal_lm(dir, o);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

}  // namespace mx::test
