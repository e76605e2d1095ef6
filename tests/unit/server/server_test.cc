// The HTTP server end to end over loopback, on the fake model and tokenizer
// of the engine tests: protocol shapes, SSE, errors, auth, limits, aborts.
#include "server/openai_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "../engine/fakes.h"

namespace mx {
namespace {

using nlohmann::json;

class ServerTest : public ::testing::Test {
 protected:
  void start(EngineConfig config = {}, ServerOptions options = {}, bool attach = true) {
    config.max_model_len = 64;
    config.block_size = 4;
    if (config.num_kv_blocks == 0) config.num_kv_blocks = 64;
    engine_ = std::make_unique<Engine>(model_, tokenizer_, config);
    engine_->start();
    options.port = 0;
    options_ = options;
    server_ = std::make_unique<OpenAIServer>(options);
    port_ = server_->start();
    if (attach) attach_model();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(10, 0);
  }
  void attach_model() { server_->attach(*engine_, ServedModel{tokenizer_, nullptr, "fake-model", 64, 64}); }
  void TearDown() override {
    if (server_) server_->stop();
    if (engine_) engine_->stop();
  }
  std::pair<int, json> post(const std::string& path, const std::string& body, httplib::Headers headers = {}) {
    auto res = client_->Post(path.c_str(), headers, body, "application/json");
    EXPECT_TRUE(res) << "no response from " << path;
    if (!res) return {0, nullptr};
    return {res->status, json::parse(res->body, nullptr, false)};
  }
  // Status and error body for a bad request; checks the OpenAI error shape.
  int expect_error(const std::string& path, const std::string& body, int status) {
    auto [code, j] = post(path, body);
    EXPECT_EQ(code, status) << body << " -> " << j.dump();
    EXPECT_TRUE(j.contains("error") && j["error"].contains("message") && j["error"].contains("type") &&
                j["error"].contains("param") && j["error"].contains("code"))
        << j.dump();
    return code;
  }
  std::vector<json> stream_events(const std::string& path, const json& body, std::string* raw = nullptr) {
    std::string text;
    auto res = client_->Post(path.c_str(), body.dump(), "application/json");
    EXPECT_TRUE(res);
    if (!res) return {};
    EXPECT_EQ(res->status, 200);
    text = res->body;
    if (raw) *raw = text;
    std::vector<json> events;
    size_t pos = 0;
    while ((pos = text.find("data: ", pos)) != std::string::npos) {
      size_t end = text.find("\n\n", pos);
      std::string payload = text.substr(pos + 6, end - pos - 6);
      events.push_back(payload == "[DONE]" ? json("[DONE]") : json::parse(payload));
      pos = end;
    }
    return events;
  }

  test::FakeModel model_;
  test::FakeTokenizer tokenizer_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<OpenAIServer> server_;
  std::unique_ptr<httplib::Client> client_;
  ServerOptions options_;
  int port_ = 0;
};

TEST_F(ServerTest, HealthIs503UntilTheModelIsAttached) {
  start({}, {}, false);
  EXPECT_EQ(client_->Get("/health")->status, 503);
  EXPECT_EQ(client_->Get("/v1/models")->status, 503);
  attach_model();
  EXPECT_EQ(client_->Get("/health")->status, 200);
  auto models = json::parse(client_->Get("/v1/models")->body);
  EXPECT_EQ(models["data"][0]["id"], "fake-model");
}

TEST_F(ServerTest, CompletesAndCountsUsage) {
  start();
  auto [status, j] = post("/v1/completions", R"({"model":"fake-model","prompt":"abc","max_tokens":5,"temperature":0,"ignore_eos":true})");
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 5);
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
}

TEST_F(ServerTest, StreamsTheSameTextAsAWholeResponse) {
  start();
  const json body = {{"prompt", {{2, 3, 4, 5}, {6, 7}}}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true}, {"n", 2},
                     {"logprobs", 2}};
  auto [status, whole] = post("/v1/completions", body.dump());
  ASSERT_EQ(status, 200) << whole.dump();
  ASSERT_EQ(whole["choices"].size(), 4u);
  json sbody = body;
  sbody["stream"] = true;
  sbody["stream_options"] = {{"include_usage", true}};
  auto events = stream_events("/v1/completions", sbody);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json usage = events[events.size() - 2];
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"], whole["usage"]);
  std::vector<std::string> texts(4);
  std::vector<int> finished(4, 0), lp_tokens(4, 0);
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json& c = events[i]["choices"][0];
    texts[c["index"].get<size_t>()] += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) ++finished[c["index"].get<size_t>()];
    lp_tokens[c["index"].get<size_t>()] += int(c["logprobs"]["tokens"].size());
  }
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(texts[i], whole["choices"][i]["text"]) << i;
    EXPECT_EQ(finished[i], 1);
    EXPECT_EQ(lp_tokens[i], 6);
    EXPECT_EQ(whole["choices"][i]["logprobs"]["top_logprobs"][0].size(), 2u);
  }
}

TEST_F(ServerTest, RejectsBadRequestsWithOpenAIErrors) {
  start();
  const std::string c = "/v1/completions";
  expect_error(c, "{not json", 400);
  expect_error(c, R"({"prompt":"a","max_tokens":"5"})", 400);
  expect_error(c, R"({"prompt":"a","max_tokens":0})", 400);
  expect_error(c, R"({"prompt":"a","n":100})", 400);
  expect_error(c, R"({"prompt":"a","temperature":-1})", 400);
  expect_error(c, R"({"prompt":"a","top_p":1.5})", 400);
  expect_error(c, R"({"prompt":[1,2,999]})", 400);
  expect_error(c, R"({"prompt":"a","frobnicate":1})", 400);
  expect_error(c, R"({"prompt":"a","stop":5})", 400);
  expect_error(c, R"({"prompt":"a","logprobs":3,"echo":true})", 400);
  expect_error(c, R"({"prompt":"a","stream_options":{"include_usage":true}})", 400);
  expect_error(c, R"({"prompt":"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmn","max_tokens":1})", 400);
  expect_error(c, R"({"prompt":"abc","max_tokens":62})", 400);  // 3 + 62 > 64
  expect_error(c, R"([1,2])", 400);
  expect_error(c, R"({"prompt":"a","model":"other"})", 404);
  expect_error("/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})", 400);  // no template
  expect_error("/v1/nothing", "{}", 404);
  // Still serving.
  EXPECT_EQ(post(c, R"({"prompt":"abc","max_tokens":2})").first, 200);
}

TEST_F(ServerTest, LimitsTheBodySize) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  start({}, o);
  expect_error("/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump(), 413);
}

TEST_F(ServerTest, RequiresTheApiKeyExceptForHealth) {
  ServerOptions o;
  o.api_key = "sesame";
  start({}, o);
  EXPECT_EQ(client_->Get("/health")->status, 200);
  EXPECT_EQ(client_->Get("/v1/models")->status, 401);
  EXPECT_EQ(client_->Get("/metrics")->status, 401);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"a"})", {{"Authorization", "Bearer wrong"}}).first, 401);
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"a"})", {{"Authorization", "Bearer sesame"}}).first, 200);
}

TEST_F(ServerTest, TokenizesAndDetokenizes) {
  start();
  auto [s1, t] = post("/tokenize", R"({"prompt":"abc"})");
  ASSERT_EQ(s1, 200);
  EXPECT_EQ(t["tokens"], json({2, 3, 4}));
  EXPECT_EQ(t["count"], 3);
  auto [s2, d] = post("/detokenize", R"({"tokens":[2,3,4]})");
  ASSERT_EQ(s2, 200);
  EXPECT_EQ(d["prompt"], "abc");
  expect_error("/detokenize", R"({"tokens":[-1]})", 400);
}

TEST_F(ServerTest, AnswersBusyWhenTheQueueIsFull) {
  model_.step_delay = std::chrono::milliseconds(20);
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_queued_requests = 0;
  start(c);
  std::thread slow([&] {
    httplib::Client other("127.0.0.1", port_);
    other.set_read_timeout(10, 0);
    other.Post("/v1/completions", R"({"prompt":"abc","max_tokens":30,"ignore_eos":true})", "application/json");
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine_->metrics().num_running.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  expect_error("/v1/completions", R"({"prompt":"abc","max_tokens":2})", 503);
  slow.join();
  EXPECT_EQ(post("/v1/completions", R"({"prompt":"abc","max_tokens":2})").first, 200);
}

TEST_F(ServerTest, ClientDisconnectAbortsTheStream) {
  model_.step_delay = std::chrono::milliseconds(10);
  start();
  int chunks = 0;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":"abcdefgh","max_tokens":50,"ignore_eos":true,"stream":true})";
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 3; };  // hang up
  client_->send(req);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (engine_->block_manager().num_free_blocks() != 64 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine_->block_manager().num_free_blocks(), 64);
  EXPECT_LT(engine_->metrics().generation_tokens.load(), 50) << "the request ran to the end";
}

TEST_F(ServerTest, MetricsHistogramsMove) {
  start();
  auto count = [&](const std::string& name) {
    const std::string text = client_->Get("/metrics")->body;
    const std::string key = name + "_count ";
    const size_t pos = text.find(key);
    EXPECT_NE(pos, std::string::npos) << name;
    return pos == std::string::npos ? -1.0 : std::stod(text.substr(pos + key.size()));
  };
  const double before = count("mxserve:time_to_first_token_seconds");
  post("/v1/completions", R"({"prompt":"abc","max_tokens":3,"ignore_eos":true})");
  EXPECT_EQ(count("mxserve:time_to_first_token_seconds"), before + 1);
  EXPECT_EQ(count("mxserve:e2e_request_latency_seconds"), 1);
  EXPECT_EQ(count("mxserve:inter_token_latency_seconds"), 2);
  const std::string text = client_->Get("/metrics")->body;
  EXPECT_NE(text.find("mxserve:kv_cache_usage_perc"), std::string::npos);
  EXPECT_NE(text.find("mxserve:prompt_tokens_total 3"), std::string::npos);
  EXPECT_NE(text.find("mxserve:generation_tokens_total 3"), std::string::npos);
}

}  // namespace
}  // namespace mx
