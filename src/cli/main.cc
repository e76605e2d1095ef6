// mxserve: one binary, subcommands (serve, generate, bench, quantize, synth,
// inspect). Subcommands register themselves (see command.h).
#include <cstdio>

#include "cli/command.h"
#include "core/error.h"

namespace mx::cli {
std::vector<Setup>& registry() {
  static std::vector<Setup> r;
  return r;
}
}  // namespace mx::cli

int main(int argc, char** argv) {
  CLI::App app{"mxserve: an LLM serving engine for MXFP4 mixture-of-experts models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "mxserve 0.1.0");
  for (auto& setup : mx::cli::registry()) setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const mx::InvalidArgument& e) {
    std::fprintf(stderr, "mxserve: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mxserve: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
