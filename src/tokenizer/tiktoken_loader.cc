// tiktoken rank files with Kimi's conventions (tokenization_kimi.py): the
// pre-tokenizer pattern, 256 reserved special ids after the ranks, the encode
// wrapper's chunking, and <|im_end|> as a second EOS.
#include <fstream>
#include <map>

#include "core/error.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/config_util.h"

namespace mx {
namespace {

constexpr int32_t kReservedSpecials = 256;
constexpr size_t kChunkCodePoints = 400'000;
constexpr size_t kMaxRunCodePoints = 25'000;

std::vector<std::string> read_ranks(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input("cannot open tiktoken rank file {}", path.string());
  std::vector<std::string> tokens;
  std::vector<bool> seen;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    size_t space = line.find(' ');
    if (space == std::string::npos) fail_input("{}:{}: expected 'base64 rank'", path.string(), line_no);
    long rank = -1;
    try {
      rank = std::stol(line.substr(space + 1));
    } catch (const std::exception&) {
    }
    if (rank < 0) fail_input("{}:{}: bad rank '{}'", path.string(), line_no, line.substr(space + 1));
    if (static_cast<size_t>(rank) >= tokens.size()) tokens.resize(rank + 1), seen.resize(rank + 1);
    if (seen[rank]) fail_input("{}:{}: rank {} appears twice", path.string(), line_no, rank);
    seen[rank] = true;
    tokens[rank] = tokenizer_config::base64_decode(std::string_view(line).substr(0, space));
  }
  for (size_t r = 0; r < seen.size(); ++r)
    if (!seen[r]) fail_input("{}: rank {} is missing (ranks must be 0..n-1)", path.string(), r);
  if (tokens.empty()) fail_input("{}: no ranks", path.string());
  return tokens;
}

}  // namespace

std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::filesystem::path& tiktoken_model,
                                                   const std::filesystem::path& tokenizer_config) {
  BpeTokenizerParts parts;
  parts.model = BpeModel::from_ranks(read_ranks(tiktoken_model));
  parts.pre_tokenizer.add_step(patterns::kKimi, SplitBehavior::kMatchesOnly);
  parts.chunk_code_points = kChunkCodePoints;
  parts.max_run_code_points = kMaxRunCodePoints;

  nlohmann::json config = tokenizer_config.empty() ? nlohmann::json::object()
                                                   : tokenizer_config::read_json(tokenizer_config);
  std::map<int32_t, std::pair<std::string, bool>> named;  // id -> (content, special)
  if (auto it = config.find("added_tokens_decoder"); it != config.end() && it->is_object()) {
    for (const auto& [key, entry] : it->items()) {
      int32_t id = std::stoi(key);
      if (!entry.contains("content")) fail_input("{}: added_tokens_decoder[{}] has no content", tokenizer_config.string(), key);
      named[id] = {entry["content"].get<std::string>(), entry.value("special", true)};
    }
  }
  int32_t first = parts.model.size();
  for (int32_t id = first; id < first + kReservedSpecials; ++id) {
    AddedToken t;
    t.id = id;
    auto it = named.find(id);
    t.content = it != named.end() ? it->second.first : fmt::format("<|reserved_token_{}|>", id);
    t.special = it != named.end() ? it->second.second : true;
    t.matched_always = false;  // all 256 are tiktoken specials: only cut out when allowed
    parts.added_tokens.push_back(std::move(t));
  }
  auto id_of = [&](const std::string& content) -> std::optional<int32_t> {
    for (const auto& t : parts.added_tokens)
      if (t.content == content) return t.id;
    return std::nullopt;
  };
  if (auto bos = tokenizer_config::token_string(config, "bos_token")) parts.bos_id = id_of(*bos);
  if (auto eos = tokenizer_config::token_string(config, "eos_token"))
    if (auto id = id_of(*eos)) parts.eos_ids.push_back(*id);
  // Kimi ends every turn with <|im_end|> while the config's eos is [EOS]: stop on both.
  if (auto im_end = id_of("<|im_end|>"))
    if (std::find(parts.eos_ids.begin(), parts.eos_ids.end(), *im_end) == parts.eos_ids.end())
      parts.eos_ids.push_back(*im_end);
  parts.add_bos = config.value("add_bos_token", false);
  return std::make_unique<BpeTokenizer>(std::move(parts));
}

}  // namespace mx
