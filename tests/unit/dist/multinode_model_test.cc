// A tensor-parallel model over two nodes (node 0 and a worker node as threads
// of this process, joined over loopback TCP exactly as two processes are):
// node 0's logits equal the single-process group's bitwise (the tcp
// communicator sums in LocalGroup's order), a rank failing on the other node
// stops node 0 with that rank's error, and the worker ends with node 0.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <future>

#include "core/error.h"
#include "dist/tcp_channel.h"
#include "model/greedy.h"
#include "model/parallel_causal_lm.h"
#include "quant/synth_checkpoint.h"

namespace mx {
namespace {

namespace fs = std::filesystem;

// Written once per process: node 0 and node 1's thread both ask for it at the
// start of a test, and two threads writing it at once could hand one of them a
// half-written config.json (seen in CI: "config.json hash ... differs").
fs::path kimi() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("mx_mn_" + std::to_string(::getpid()) + "_kimi");
    if (!fs::exists(d / "config.json")) write_synthetic_checkpoint(d, "kimi-k25-mxfp4", 11);
    return d;
  }();
  return dir;
}

LoadOptions tp2() {
  LoadOptions o;
  o.tensor_parallel_size = 2;
  o.num_threads = 2;
  return o;
}

MultiNodeOptions node(int rank, int port) { return MultiNodeOptions{2, rank, "127.0.0.1", port, 30}; }

int free_port() {
  TcpListener probe(0);
  return probe.port();
}

// Node 1 on a thread: "" when it ended cleanly, else its error.
std::future<std::string> start_worker(const LoadOptions& o, int port) {
  return std::async(std::launch::async, [o, port] {
    try {
      run_worker_node(kimi(), o, node(1, port));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  });
}

GreedyResult generate(CausalLM& model) {
  GreedyOptions g;
  g.max_new_tokens = 6;
  g.block_size = 4;
  g.prefill_chunk = 5;
  g.kv_dtype = KvCacheDtype::F32;
  return greedy_generate(model, {3, 17, 250, 9, 31, 77, 5, 130, 64, 8, 12}, g);
}

TEST(MultiNode, LogitsEqualTheSingleProcessGroupBitwise) {
  GreedyResult want;
  {
    auto one_process = load_causal_lm(kimi(), tp2());
    want = generate(*one_process);
  }
  const int port = free_port();
  auto worker = start_worker(tp2(), port);
  {
    auto node0 = load_multinode_causal_lm(kimi(), tp2(), node(0, port));
    EXPECT_NE(node0->describe().find("2 ranks on 2 nodes"), std::string::npos) << node0->describe();
    const GreedyResult got = generate(*node0);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.prompt_logits, want.prompt_logits);  // float ==: bitwise for these finite values
    EXPECT_EQ(got.step_logits, want.step_logits);
  }
  ASSERT_EQ(worker.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(worker.get(), "");  // node 0's shutdown ended it cleanly
}

TEST(MultiNode, ARankFailingOnAnotherNodeStopsNodeZeroWithItsError) {
  const int port = free_port();
  LoadOptions w = tp2();
  w.parallel_step_hook = [](int rank, int64_t step) {
    if (rank == 1 && step == 2) fail("CUDA error: an illegal memory access was encountered");
  };
  auto worker = start_worker(w, port);
  {
    LoadOptions o = tp2();
    int reported = 0;
    std::string why;
    o.on_parallel_failure = [&](const std::string& m) {
      ++reported;
      why = m;
    };
    auto node0 = load_multinode_causal_lm(kimi(), o, node(0, port));
    try {
      generate(*node0);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), "node 1, rank 1: CUDA error: an illegal memory access was encountered");
    }
    EXPECT_EQ(reported, 1);
    EXPECT_NE(why.find("node 1, rank 1"), std::string::npos) << why;
    try {
      generate(*node0);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("stopped earlier"), std::string::npos) << e.what();
    }
    EXPECT_EQ(reported, 1);
  }
  ASSERT_EQ(worker.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_NE(worker.get().find("node 0 ended the group after a failure"), std::string::npos);
}

TEST(MultiNode, AWorkerWithoutNodeZeroGivesUpNamingIt) {
  const int port = free_port();
  try {
    run_worker_node(kimi(), tp2(), MultiNodeOptions{2, 1, "127.0.0.1", port, 0.3});
    FAIL() << "ran without node 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("node 0 at 127.0.0.1:{}", port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mx
