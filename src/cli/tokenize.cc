// `mxserve tokenize`: the tokenizer and chat template from the command line.
//   --text T            print the ids of T
//   --jsonl             batch mode: one JSON request per stdin line, one JSON
//                       answer per stdout line (tests drive thousands of inputs
//                       through one process this way); see docs/tokenizer.md
//   --bench FILE        encode FILE repeatedly and print MB/s
#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace mx::cli {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

struct TokenizeOptions {
  std::string model;
  std::string text;
  std::string bench_file;
  std::string template_file;
  bool jsonl = false;
  bool allow_special = false;
  double bench_seconds = 3;
};

ordered_json handle_request(const Tokenizer* tok, const ChatTemplate* tmpl, const ordered_json& req) {
  std::string op = req.value("op", "encode");
  ordered_json out;
  auto need_tok = [&] {
    if (!tok) fail_input("op '{}' needs --model", op);
  };
  if (op == "encode") {
    need_tok();
    out["ids"] = tok->encode(req.at("text").get<std::string>(), req.value("allow_special", false));
  } else if (op == "decode") {
    need_tok();
    auto ids = req.at("ids").get<std::vector<int32_t>>();
    out["text"] = tok->decode(ids, req.value("skip_special", false));
  } else if (op == "stream") {
    need_tok();
    auto ids = req.at("ids").get<std::vector<int32_t>>();
    IncrementalDetokenizer detok(*tok, req.value("skip_special", false));
    ordered_json deltas = ordered_json::array();
    for (int32_t id : ids) deltas.push_back(detok.push(id));
    deltas.push_back(detok.finish());
    out["deltas"] = deltas;
  } else if (op == "info") {
    need_tok();
    out["vocab_size"] = tok->vocab_size();
    out["bos_id"] = tok->bos_id() ? json(*tok->bos_id()) : json(nullptr);
    out["eos_ids"] = tok->eos_ids();
    out["add_bos"] = tok->add_bos();
  } else if (op == "render") {
    if (!tmpl) fail_input("op 'render' needs --template or a model directory with a chat template");
    out["text"] = tmpl->render_ordered(req.value("messages", ordered_json::array()), req.value("tools", ordered_json()),
                                       req.value("add_generation_prompt", false), req.value("extra", ordered_json()));
  } else {
    fail_input("unknown op '{}' (encode, decode, stream, info, render)", op);
  }
  return out;
}

void run_jsonl(const Tokenizer* tok, const ChatTemplate* tmpl) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    ordered_json answer;
    try {
      answer = handle_request(tok, tmpl, ordered_json::parse(line));
    } catch (const std::exception& e) {
      answer = ordered_json{{"error", e.what()}};
    }
    std::cout << answer.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  std::cout.flush();
}

void run_bench(const Tokenizer& tok, const std::string& file, double seconds) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail_input("cannot open {}", file);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string corpus = ss.str();
  // Encode line by line, as a server encodes many short prompts.
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < corpus.size();) {
    size_t nl = corpus.find('\n', pos);
    size_t end = nl == std::string::npos ? corpus.size() : nl + 1;
    lines.push_back(std::string_view(corpus).substr(pos, end - pos));
    pos = end;
  }
  using clock = std::chrono::steady_clock;
  size_t bytes = 0, tokens = 0, passes = 0;
  auto start = clock::now();
  std::clock_t cpu_start = std::clock();
  double elapsed = 0;
  do {
    for (auto l : lines) tokens += tok.encode(l, false).size();
    bytes += corpus.size();
    ++passes;
    elapsed = std::chrono::duration<double>(clock::now() - start).count();
  } while (elapsed < seconds);
  // CPU time too: on a shared machine wall time measures the neighbours.
  double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  json result{{"bytes_per_pass", corpus.size()}, {"passes", passes}, {"seconds", elapsed}, {"cpu_seconds", cpu},
              {"tokens_per_pass", tokens / passes}, {"mb_per_s", bytes / elapsed / 1e6},
              {"mb_per_cpu_s", bytes / cpu / 1e6}};
  std::cout << result.dump() << '\n';
}

Register reg([](CLI::App& app) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Encode/decode text, render chat templates, benchmark the tokenizer");
  cmd->add_option("--model", opts->model, "Model directory or tokenizer file (tokenizer.json, tiktoken.model)");
  cmd->add_option("--text", opts->text, "Text to encode (prints the ids as JSON)");
  cmd->add_flag("--allow-special", opts->allow_special, "Special-token strings in --text become their ids");
  cmd->add_flag("--jsonl", opts->jsonl, "Batch mode: JSON requests on stdin, JSON answers on stdout");
  cmd->add_option("--template", opts->template_file, "Chat template file (default: the model directory's)");
  cmd->add_option("--bench", opts->bench_file, "Encode this file repeatedly and print MB/s");
  cmd->add_option("--bench-seconds", opts->bench_seconds, "Minimum benchmark duration")->check(CLI::PositiveNumber);
  cmd->callback([opts] {
    std::unique_ptr<Tokenizer> tok;
    if (!opts->model.empty()) tok = load_tokenizer(opts->model);
    std::unique_ptr<ChatTemplate> tmpl;
    if (!opts->template_file.empty()) {
      std::ifstream in(opts->template_file, std::ios::binary);
      if (!in) fail_input("cannot open template {}", opts->template_file);
      std::stringstream ss;
      ss << in.rdbuf();
      std::string bos, eos;
      if (tok && tok->bos_id()) bos = tok->token_bytes(*tok->bos_id());
      if (tok && !tok->eos_ids().empty()) eos = tok->token_bytes(tok->eos_ids()[0]);
      tmpl = parse_chat_template(ss.str(), bos, eos);
    } else if (!opts->model.empty() && std::filesystem::is_directory(opts->model)) {
      tmpl = load_chat_template(opts->model);
    }
    if (opts->jsonl) return run_jsonl(tok.get(), tmpl.get());
    if (!tok) fail_input("tokenize needs --model");
    if (!opts->bench_file.empty()) return run_bench(*tok, opts->bench_file, opts->bench_seconds);
    std::cout << json(tok->encode(opts->text, opts->allow_special)).dump() << '\n';
  });
});

}  // namespace
}  // namespace mx::cli
