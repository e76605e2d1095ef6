// mxserve synth: writes a small random checkpoint of a real layout (see
// quant/synth_checkpoint.h for the presets).
#include <fmt/format.h>

#include "cli/command.h"
#include "quant/synth_checkpoint.h"

namespace {

struct SynthArgs {
  std::string out, preset;
  uint64_t seed = 0;
};

std::string preset_help() {
  std::string s = "checkpoint layout:";
  for (const auto& p : mx::synth_presets()) s += fmt::format("\n  {}: {}", p.name, p.description);
  return s;
}

mx::cli::Register reg([](CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand("synth", "Write a small random checkpoint (config.json + model.safetensors)");
  cmd->add_option("--out", args->out, "output directory (created)")->required();
  cmd->add_option("--preset", args->preset, preset_help())->required();
  cmd->add_option("--seed", args->seed, "random seed (same seed, same bytes)")->capture_default_str();
  cmd->callback([args] {
    mx::SynthResult r = mx::write_synthetic_checkpoint(args->out, args->preset, args->seed);
    fmt::print("wrote {} ({} tensors, {:.2f} MB of weights) to {}\n", args->preset, r.tensors, r.bytes / 1e6, args->out);
  });
});

}  // namespace
