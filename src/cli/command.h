// Each subcommand lives in its own file and registers itself here, so adding
// one touches no shared file:
//   static mx::cli::Register reg([](CLI::App& app) {
//     auto* cmd = app.add_subcommand("synth", "...");
//     cmd->callback([=] { ... });
//   });
// Callbacks report failure by throwing mx::Error (exit 1) or
// mx::InvalidArgument (exit 2); main prints the message.
#pragma once
#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace mx::cli {

using Setup = std::function<void(CLI::App&)>;

std::vector<Setup>& registry();

struct Register {
  explicit Register(Setup s) { registry().push_back(std::move(s)); }
};

}  // namespace mx::cli
