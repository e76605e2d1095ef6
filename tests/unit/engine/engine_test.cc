#include "engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "fakes.h"

namespace mx {
namespace {

using test::FakeModel;
using test::FakeTokenizer;

struct Result {
  std::vector<std::vector<int32_t>> tokens;  // per choice
  std::vector<std::string> text;
  std::vector<std::string> finish;
  std::vector<ChoiceDelta> deltas;
};

Result collect(RequestStream& stream, int n = 1) {
  Result r;
  r.tokens.resize(size_t(n));
  r.text.resize(size_t(n));
  r.finish.resize(size_t(n));
  while (!stream.done()) {
    for (auto& d : stream.wait(std::chrono::milliseconds(5000))) {
      auto i = size_t(d.index);
      r.tokens[i].insert(r.tokens[i].end(), d.token_ids.begin(), d.token_ids.end());
      r.text[i] += d.text;
      if (d.finish_reason) r.finish[i] = finish_reason_name(*d.finish_reason);
      r.deltas.push_back(d);
    }
  }
  return r;
}

EngineConfig small_config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.max_model_len = 128;
  c.block_size = 4;
  c.num_kv_blocks = 256;
  return c;
}

EngineRequest make_request(int prompt_len, int max_tokens, int salt, float temperature = 0) {
  EngineRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt_tokens.push_back(2 + (i * 7 + salt) % 60);
  r.params.max_tokens = max_tokens;
  r.params.temperature = temperature;
  r.params.ignore_eos = true;
  if (temperature > 0) r.params.seed = uint64_t(1000 + salt);
  return r;
}

Result run_alone(const EngineRequest& request) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  auto stream = engine.submit(request);
  engine.run_until_idle();
  return collect(*stream);
}

// A burst of requests with different prompt and output lengths through a
// small KV cache and token budget (so prefills are chunked, decodes and
// prefills share steps and sequences get preempted) must give every request
// exactly what it gets alone, and leave every block free.
void check_burst_matches_solo(float temperature) {
  std::vector<EngineRequest> requests;
  for (int i = 0; i < 12; ++i) requests.push_back(make_request(3 + 9 * i % 41, 5 + 7 * i % 23, i, temperature));
  FakeModel model;
  FakeTokenizer tok;
  EngineConfig config = small_config();
  config.num_kv_blocks = 32;  // 128 token slots for ~400 tokens of demand
  config.max_num_batched_tokens = 24;
  Engine engine(model, tok, config);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const auto& r : requests) streams.push_back(engine.submit(r));
  engine.run_until_idle();
  EXPECT_GT(engine.metrics().preemptions.load(), 0) << "the burst should overflow the KV cache";
  EXPECT_LE(model.max_tokens_in_step, 24);
  for (size_t i = 0; i < requests.size(); ++i) {
    Result together = collect(*streams[i]);
    Result alone = run_alone(requests[i]);
    EXPECT_EQ(together.tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(together.text, alone.text) << "request " << i;
    EXPECT_EQ(int(together.tokens[0].size()), requests[i].params.max_tokens);
    EXPECT_EQ(together.finish[0], "length");
  }
  EXPECT_EQ(engine.block_manager().num_free_blocks(), config.num_kv_blocks);
}

TEST(Engine, GreedyBurstMatchesEachRequestAlone) { check_burst_matches_solo(0.0f); }
TEST(Engine, SeededBurstMatchesEachRequestAlone) { check_burst_matches_solo(1.0f); }

TEST(Engine, PassesTheKvDtypeToTheModel) {
  FakeModel model;
  FakeTokenizer tok;
  EngineConfig c = small_config();
  c.kv_cache_dtype = KvCacheDtype::FP8;
  Engine engine(model, tok, c);
  EXPECT_EQ(model.dtype_, KvCacheDtype::FP8);
}

TEST(Engine, ReusesThePromptPrefixAcrossRequests) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  auto first = engine.submit(make_request(20, 3, 1));
  engine.run_until_idle();
  auto second = engine.submit(make_request(20, 3, 1));
  engine.run_until_idle();
  EXPECT_EQ(engine.block_manager().prefix_stats().hit_tokens, 16);
  EXPECT_EQ(collect(*first).tokens, collect(*second).tokens);
}

TEST(Engine, ChoicesShareThePromptAndDifferWhenSampled) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  EngineRequest r = make_request(18, 6, 3, 1.0f);
  r.n = 3;
  auto stream = engine.submit(r);
  engine.run_until_idle();
  Result res = collect(*stream, 3);
  EXPECT_EQ(engine.block_manager().prefix_stats().hit_tokens, 2 * 16);  // choices 1, 2 reuse 4 blocks
  EXPECT_NE(res.tokens[0], res.tokens[1]);
  EXPECT_EQ(res.tokens[0], run_alone(make_request(18, 6, 3, 1.0f)).tokens[0]);  // choice 0 = the n=1 answer
  for (const auto& t : res.tokens) EXPECT_EQ(t.size(), 6u);
}

TEST(Engine, StopsAtStopStringsAcrossTokens) {
  EngineRequest r = make_request(5, 30, 2);
  Result free_run = run_alone(r);
  const std::string& text = free_run.text[0];
  ASSERT_GE(text.size(), 12u);
  // A stop string that straddles tokens: 3 characters from the middle of the text.
  const std::string stop = text.substr(7, 3);
  r.params.stop = {stop};
  Result stopped = run_alone(r);
  EXPECT_EQ(stopped.text[0], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped.finish[0], "stop");
  std::string streamed;
  for (const auto& d : stopped.deltas) {
    streamed += d.text;
    EXPECT_EQ(streamed.find(stop.substr(0, 1), text.find(stop)), std::string::npos) << "leaked part of the stop string";
  }
  EXPECT_EQ(stopped.deltas.back().stop_string, stop);
}

TEST(Engine, StopsAtEosUnlessIgnored) {
  // Find an eos-free run, then make its third token a stop token.
  EngineRequest r = make_request(6, 10, 4);
  Result free_run = run_alone(r);
  const int32_t third = free_run.tokens[0][2];
  r.params.stop_token_ids = {third};
  Result stopped = run_alone(r);
  EXPECT_EQ(stopped.tokens[0], std::vector<int32_t>(free_run.tokens[0].begin(), free_run.tokens[0].begin() + 2));
  EXPECT_EQ(stopped.finish[0], "stop");
  EXPECT_EQ(stopped.deltas.back().stop_token, third);
  EXPECT_EQ(stopped.deltas.back().num_generated, 3);
}

TEST(Engine, MinTokensHoldsOffStops) {
  EngineRequest r = make_request(6, 10, 4);
  Result free_run = run_alone(r);
  r.params.stop_token_ids = {free_run.tokens[0][1]};
  r.params.stop = {free_run.text[0].substr(0, 1)};
  r.params.min_tokens = 5;
  Result held = run_alone(r);
  ASSERT_GE(held.tokens[0].size(), 5u);
  for (size_t i = 0; i < 5; ++i) EXPECT_NE(held.tokens[0][i], r.params.stop_token_ids[0]) << i;
  EXPECT_EQ(held.text[0].substr(0, 1), free_run.text[0].substr(0, 1));  // the early stop string did not end it
}

TEST(Engine, ValidatesRequests) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  EXPECT_THROW(engine.submit(make_request(100, 29, 0)), InvalidArgument);  // 129 > 128
  EXPECT_NO_THROW(engine.submit(make_request(100, 28, 0)));
  EXPECT_THROW(engine.submit(make_request(0, 5, 0)), InvalidArgument);
  EngineRequest bad_token = make_request(3, 5, 0);
  bad_token.prompt_tokens[1] = 64;
  EXPECT_THROW(engine.submit(bad_token), InvalidArgument);
  EngineRequest bad_n = make_request(3, 5, 0);
  bad_n.n = 17;
  EXPECT_THROW(engine.submit(bad_n), InvalidArgument);
}

TEST(Engine, RefusesWhenTheQueueIsFull) {
  FakeModel model;
  FakeTokenizer tok;
  EngineConfig c = small_config();
  c.max_num_seqs = 1;
  c.max_queued_requests = 1;
  Engine engine(model, tok, c);
  engine.submit(make_request(3, 2, 0));
  engine.submit(make_request(3, 2, 1));
  EXPECT_THROW(engine.submit(make_request(3, 2, 2)), QueueFull);
  engine.run_until_idle();
  EXPECT_NO_THROW(engine.submit(make_request(3, 2, 2)));
}

TEST(Engine, AbortFreesBlocks) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  auto stream = engine.submit(make_request(30, 50, 0));
  engine.step();
  engine.step();
  EXPECT_LT(engine.block_manager().num_free_blocks(), 256);
  engine.abort(stream);
  engine.step();
  EXPECT_EQ(engine.block_manager().num_free_blocks(), 256);
  Result r = collect(*stream);
  EXPECT_EQ(r.finish[0], "abort");
}

TEST(Engine, ModelFailureFailsRequestsAndKeepsServing) {
  FakeModel model;
  FakeTokenizer tok;
  Engine engine(model, tok, small_config());
  engine.start();
  model.fail_next_forward = true;
  auto failed = engine.submit(make_request(5, 3, 0));
  Result r = collect(*failed);
  EXPECT_EQ(r.finish[0], "error");
  auto ok = engine.submit(make_request(5, 3, 0));
  EXPECT_EQ(collect(*ok).finish[0], "length");
  EXPECT_EQ(engine.block_manager().num_free_blocks(), 256);
}

TEST(Engine, ConcurrentSubmissionsOnTheLoopThread) {
  FakeModel model;
  FakeTokenizer tok;
  EngineConfig c = small_config();
  c.num_kv_blocks = 40;
  Engine engine(model, tok, c);
  engine.start();
  std::vector<std::thread> clients;
  std::vector<Result> results(16);
  for (int i = 0; i < 16; ++i)
    clients.emplace_back([&, i] { results[size_t(i)] = collect(*engine.submit(make_request(4 + i * 3, 4 + i, i))); });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(results[size_t(i)].tokens, run_alone(make_request(4 + i * 3, 4 + i, i)).tokens);
  engine.stop();
  EXPECT_EQ(engine.block_manager().num_free_blocks(), 40);
  EXPECT_EQ(engine.metrics().time_to_first_token.count(), 16);
  EXPECT_EQ(engine.metrics().e2e_latency.count(), 16);
}

}  // namespace
}  // namespace mx
