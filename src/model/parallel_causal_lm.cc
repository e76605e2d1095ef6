#include "model/parallel_causal_lm.h"

#include <fmt/format.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "dist/communicator_factory.h"
#include "dist/node_group.h"
#include "dist/rank_workers.h"
#include "dist/wire.h"
#include "model/step_graphs.h"

namespace mx {

namespace {

// Commands node 0 sends to the other nodes: every call the group fans out.
enum Command : uint32_t {
  kLoad = NodeGroup::kFirstCommandTag,
  kAllocateKv,
  kForward,
  kShutdown,
  kEnableStepGraphs,
};

std::string encode_graphs(const StepGraphConfig& c) {
  wire::Writer w;
  w.vec(c.batch_sizes);
  w.pod(c.max_blocks_per_seq);
  return w.take();
}

StepGraphConfig decode_graphs(const std::string& bytes) {
  wire::Reader r(bytes, "step graph config");
  StepGraphConfig c;
  c.batch_sizes = r.vec<int64_t>();
  c.max_blocks_per_seq = r.pod<int64_t>();
  r.finish();
  return c;
}

std::string encode_batch(const ForwardBatch& batch) {
  wire::Writer w;
  w.vec(batch.token_ids);
  w.vec(batch.positions);
  w.pod(uint64_t(batch.seqs.size()));
  for (const SequenceSlice& s : batch.seqs) {
    w.pod(s.num_cached_tokens);
    w.pod(s.num_new_tokens);
    w.vec(s.block_table);
    w.pod(uint8_t(s.need_logits));
  }
  return w.take();
}

ForwardBatch decode_batch(const std::string& bytes) {
  wire::Reader r(bytes, "forward batch");
  ForwardBatch batch;
  batch.token_ids = r.vec<int32_t>();
  batch.positions = r.vec<int32_t>();
  const auto n = r.pod<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    SequenceSlice s;
    s.num_cached_tokens = r.pod<int64_t>();
    s.num_new_tokens = r.pod<int64_t>();
    s.block_table = r.vec<int32_t>();
    s.need_logits = r.pod<uint8_t>() != 0;
    batch.seqs.push_back(std::move(s));
  }
  r.finish();
  return batch;
}

struct KvRequest {
  int64_t num_blocks, block_size;
  KvCacheDtype dtype;
};

// This process's ranks of the group: a model and a worker thread each.
class RankSet {
 public:
  RankSet(std::vector<std::unique_ptr<Communicator>> comms, int first_rank, int world)
      : comms_(std::move(comms)),
        first_rank_(first_rank),
        world_(world),
        models_(comms_.size()),
        workers_(int(comms_.size()), [this](const std::string& why) { abort(why); }) {}
  ~RankSet() {
    // Each rank's model is freed on its own thread (its device's context).
    if (!workers_.failed()) try {
        workers_.run([&](int r) { models_[size_t(r)].reset(); });
      } catch (const std::exception& e) {
        log::warn("freeing the ranks' models: {}", e.what());
      }
  }

  int first_rank() const { return first_rank_; }
  CausalLM& model(int local) { return *models_[size_t(local)]; }
  const CausalLM& model(int local) const { return *models_[size_t(local)]; }

  void load_rank(int local, const std::filesystem::path& model_dir, const LoadOptions& options) {
    LoadOptions o = options;
    o.num_threads = 0;
    o.tensor_parallel_size = 1;
    o.device_index = options.device_index + local;
    o.shard = ShardSpec{first_rank_ + local, world_, options.expert_parallel, comms_[size_t(local)].get()};
    models_[size_t(local)] = load_causal_lm(model_dir, o);
  }

  // One process: RankWorkers' error ("rank R: ...", InvalidArgument kept).
  void run(const std::function<void(int)>& job) { workers_.run(job); }

  // Across nodes: never throws; says whether this node's failure is its own
  // or the echo of a peer's (a closed channel, an abort from another node).
  NodeOutcome try_run(const std::function<void(int)>& job) {
    std::mutex mu;
    int first = -1;
    NodeOutcome failed{false, false, false, false, {}};
    auto wrapped = [&](int r) {
      try {
        job(r);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (first < 0) {
          first = r;
          failed.message = fmt::format("rank {}: {}", first_rank_ + r, e.what());
          failed.primary = dynamic_cast<const ChannelClosed*>(&e) == nullptr && !peer_stopped_;
          failed.input = dynamic_cast<const InvalidArgument*>(&e) != nullptr;
        }
        throw;
      }
    };
    try {
      workers_.run(wrapped);
      return NodeOutcome{};
    } catch (const std::exception& e) {
      if (first < 0) failed.message = e.what();  // the group had stopped before
      return failed;
    }
  }

  // Another node failed or went away: wake the local ranks from their collectives.
  void stop_for_peer(const std::string& why) {
    peer_stopped_ = true;
    abort(why);
  }

 private:
  void abort(const std::string& why) {
    for (auto& c : comms_) c->abort(why);
  }

  std::vector<std::unique_ptr<Communicator>> comms_;
  int first_rank_, world_;
  std::vector<std::unique_ptr<CausalLM>> models_;
  std::atomic<bool> peer_stopped_{false};
  RankWorkers workers_;  // last: its threads stop before the models go
};

std::vector<std::unique_ptr<Communicator>> local_communicators(const LoadOptions& options, NodeGroup* nodes) {
  const int world = options.tensor_parallel_size;
  if (!nodes) return make_parallel_communicators(options.device, world, options.device_index);
  if (options.device == "cpu") return nodes->take_host_communicators();
  return make_multinode_communicators(
      options.device,
      RankPlacement{world, nodes->first_rank(), nodes->ranks_per_node(), options.device_index, nodes->group_id()});
}

// Of every node's outcome, the failure to report: a node's own error first,
// then a node that went away, then any echo.
std::optional<NodeOutcome> first_failure(const std::vector<NodeOutcome>& outcomes) {
  auto named = [&](size_t n) {
    NodeOutcome o = outcomes[n];
    if (n > 0 && !o.lost) o.message = fmt::format("node {}, {}", n, o.message);
    return o;
  };
  for (size_t n = 0; n < outcomes.size(); ++n)
    if (!outcomes[n].ok && outcomes[n].primary) return named(n);
  for (size_t n = 0; n < outcomes.size(); ++n)
    if (outcomes[n].lost) return named(n);
  for (size_t n = 0; n < outcomes.size(); ++n)
    if (!outcomes[n].ok) return named(n);
  return std::nullopt;
}

class ParallelCausalLM : public CausalLM {
 public:
  ParallelCausalLM(const std::filesystem::path& model_dir, const LoadOptions& options,
                   std::unique_ptr<NodeGroup> nodes)
      : nodes_(std::move(nodes)),
        world_(options.tensor_parallel_size),
        expert_parallel_(options.expert_parallel),
        on_failure_(options.on_parallel_failure),
        step_hook_(options.parallel_step_hook),
        ranks_(local_communicators(options, nodes_.get()), 0, world_) {
    // One pool for all ranks, sized once (a rank's constructor would reset it).
    if (options.num_threads > 0) ThreadPool::set_global_threads(options.num_threads);
    auto load = [&](int r) { ranks_.load_rank(r, model_dir, options); };
    if (nodes_) {
      everywhere(kLoad, "", load);
      // A node lost while the server is idle stops it too, not only at the next step.
      nodes_->watch_between_commands([this](const std::string& why) { report(why); });
    } else {
      ranks_.run(load);
    }
  }

  ~ParallelCausalLM() override {
    if (nodes_) nodes_->send_to_all(kShutdown, "");
  }

  const ModelConfig& config() const override { return model0().config(); }
  // Per device: what one rank's cache takes (each rank holds its heads' KV).
  int64_t kv_bytes_per_token(KvCacheDtype dtype) const override { return model0().kv_bytes_per_token(dtype); }
  void allocate_kv_cache(int64_t num_blocks, int64_t block_size, KvCacheDtype dtype) override {
    wire::Writer w;
    w.pod(KvRequest{num_blocks, block_size, dtype});
    guarded(kAllocateKv, w.bytes(), [&](int r) { ranks_.model(r).allocate_kv_cache(num_blocks, block_size, dtype); });
  }
  // Every rank records the same steps (the same batches reach all ranks), so
  // their collectives stay in step whether a rank replays or runs eagerly.
  void enable_step_graphs(const StepGraphConfig& config) override {
    guarded(kEnableStepGraphs, nodes_ ? encode_graphs(config) : std::string(),
            [&](int r) { ranks_.model(r).enable_step_graphs(config); });
  }
  Tensor forward(const ForwardBatch& batch) override { return forward_step(batch, false); }
  // Rank 0's logits where it computed them (GPU memory on the CUDA backend),
  // for a sampler on the same device: it waits for the device before reading
  // (cuda_batch_sampler.cc), so no host copy and re-upload of [seqs, vocab]
  // F32 (5 ms a step at 40 sequences x 163,840 over pageable memory, measured
  // with --profile-ops at TP=2). The other ranks still end their step on the
  // host (forward), so a failing kernel there is reported in the same step.
  Tensor forward_resident(const ForwardBatch& batch) override { return forward_step(batch, true); }
  std::string describe() const override {
    return fmt::format("{}; {} ranks{} ({})", model0().describe(), world_,
                       nodes_ ? fmt::format(" on {} nodes", nodes_->nnodes()) : std::string(),
                       expert_parallel_ ? "tensor + expert parallel" : "tensor parallel");
  }

 private:
  const CausalLM& model0() const { return ranks_.model(0); }

  Tensor forward_step(const ForwardBatch& batch, bool resident_logits) {
    Tensor logits;
    const int64_t step = steps_++;
    guarded(kForward, nodes_ ? encode_batch(batch) : std::string(), [&](int r) {
      if (step_hook_) step_hook_(r, step);
      if (r == 0) {
        logits = resident_logits ? ranks_.model(r).forward_resident(batch) : ranks_.model(r).forward(batch);
      } else {
        ranks_.model(r).forward(batch);
      }
    });
    return logits;
  }

  void guarded(uint32_t command, const std::string& payload, const std::function<void(int)>& job) {
    try {
      if (nodes_)
        everywhere(command, payload, job);
      else
        ranks_.run(job);
    } catch (const Error& e) {
      report(e.what());
      throw;
    }
  }

  // on_failure_ runs once, from the engine's thread or a node watcher's.
  void report(const std::string& why) {
    if (on_failure_ && !reported_.exchange(true)) on_failure_(why);
  }

  // Node 0 of several: the command runs on every node; the first real failure
  // stops the group for good.
  void everywhere(uint32_t command, const std::string& payload, const std::function<void(int)>& job) {
    if (!failure_.empty()) fail("parallel group stopped earlier ({}); restart the server", failure_);
    const auto outcomes = nodes_->run_everywhere(
        command, payload, [&] { return ranks_.try_run(job); },
        [&](const std::string& why) { ranks_.stop_for_peer(why); });
    const auto failed = first_failure(outcomes);
    if (!failed) return;
    failure_ = failed->message;
    log::error("parallel group: {}", failure_);
    if (failed->input) throw InvalidArgument(failure_);
    throw Error(failure_);
  }

  std::unique_ptr<NodeGroup> nodes_;  // first: outlives the ranks
  int world_;
  bool expert_parallel_;
  std::function<void(const std::string&)> on_failure_;
  std::function<void(int, int64_t)> step_hook_;
  int64_t steps_ = 0;
  std::atomic<bool> reported_{false};
  std::string failure_;
  RankSet ranks_;
};

// FNV-1a 64 of the bytes that shape the weights: config.json in a checkpoint
// directory, else the file's size and first MiB (a GGUF file).
std::string model_hash(const std::filesystem::path& model_dir) {
  const bool dir = std::filesystem::is_directory(model_dir);
  const auto file = dir ? model_dir / "config.json" : model_dir;
  std::ifstream in(file, std::ios::binary);
  if (!in) return fmt::format("(no {})", file.string());
  std::string bytes(dir ? size_t(1) << 24 : size_t(1) << 20, '\0');
  in.read(bytes.data(), std::streamsize(bytes.size()));
  bytes.resize(size_t(in.gcount()));
  if (!dir) bytes += std::to_string(std::filesystem::file_size(file));
  return fmt::format("{:016x}", fnv1a64(bytes));
}

std::unique_ptr<NodeGroup> join_nodes(const std::filesystem::path& model_dir, const LoadOptions& options,
                                      const MultiNodeOptions& m) {
  NodeGroupOptions g;
  g.nnodes = m.nnodes;
  g.node_rank = m.node_rank;
  g.master_addr = m.master_addr;
  g.master_port = m.master_port;
  g.timeout_s = m.timeout_s;
  g.world_size = options.tensor_parallel_size;
  g.host_collectives = options.device == "cpu";
  const std::string device = options.device;
  g.make_group_id = [device] { return make_group_id(device); };
  g.must_match = {
      {"config.json hash", model_hash(model_dir)},
      {"--enable-expert-parallel", options.expert_parallel ? "on" : "off"},
      {"--load-format", options.load_format},
      {"--dummy-seed", std::to_string(options.dummy_seed)},
      {"activation mode (--w4a4)", options.activation_mode == ActivationMode::W4A4 ? "W4A4" : "W4A16"},
      {"--device", options.device},
      {"exact numerics", options.exact_numerics ? "on" : "off"},
  };
  return NodeGroup::join(g);
}

}  // namespace

std::unique_ptr<CausalLM> load_parallel_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options) {
  if (options.tensor_parallel_size < 1)
    fail_input("--tensor-parallel-size {}: must be at least 1", options.tensor_parallel_size);
  auto model = std::make_unique<ParallelCausalLM>(model_dir, options, nullptr);
  log::info("loaded {}", model->describe());
  return model;
}

std::unique_ptr<CausalLM> load_multinode_causal_lm(const std::filesystem::path& model_dir, const LoadOptions& options,
                                                   const MultiNodeOptions& nodes) {
  if (nodes.node_rank != 0) fail("load_multinode_causal_lm runs on node 0 (this is node {})", nodes.node_rank);
  auto model = std::make_unique<ParallelCausalLM>(model_dir, options, join_nodes(model_dir, options, nodes));
  log::info("loaded {}", model->describe());
  return model;
}

void run_worker_node(const std::filesystem::path& model_dir, const LoadOptions& options, const MultiNodeOptions& m) {
  if (m.node_rank < 1) fail("run_worker_node runs on nodes 1.., not node {}", m.node_rank);
  auto nodes = join_nodes(model_dir, options, m);
  if (options.num_threads > 0) ThreadPool::set_global_threads(options.num_threads);
  RankSet ranks(local_communicators(options, nodes.get()), nodes->first_rank(), options.tensor_parallel_size);
  std::string failure;
  int64_t steps = 0;
  for (;;) {
    Frame command;
    try {
      command = nodes->next_command();
    } catch (const ChannelClosed& e) {
      fail("node {}: {}; exiting (node 0 stopped or failed)", m.node_rank, e.what());
    }
    if (command.tag == kShutdown) break;
    std::function<void(int)> job;
    ForwardBatch batch;
    KvRequest kv{};
    StepGraphConfig graphs;
    if (command.tag == kLoad) {
      job = [&](int r) { ranks.load_rank(r, model_dir, options); };
    } else if (command.tag == kAllocateKv) {
      wire::Reader r(command.payload, "allocate_kv_cache command");
      kv = r.pod<KvRequest>();
      r.finish();
      job = [&](int rank) { ranks.model(rank).allocate_kv_cache(kv.num_blocks, kv.block_size, kv.dtype); };
    } else if (command.tag == kEnableStepGraphs) {
      graphs = decode_graphs(command.payload);
      job = [&](int rank) { ranks.model(rank).enable_step_graphs(graphs); };
    } else if (command.tag == kForward) {
      batch = decode_batch(command.payload);
      job = [&, step = steps++](int r) {
        if (options.parallel_step_hook) options.parallel_step_hook(ranks.first_rank() + r, step);
        ranks.model(r).forward(batch);
      };
    } else {
      fail("node {}: unknown command {:#x} from node 0 (another mxserve version?)", m.node_rank, command.tag);
    }
    const NodeOutcome outcome =
        nodes->run_watched([&] { return ranks.try_run(job); }, [&](const std::string& why) { ranks.stop_for_peer(why); });
    if (!outcome.ok && failure.empty()) {
      failure = outcome.message;
      log::error("node {}: {}", m.node_rank, failure);
    }
    try {
      nodes->send_outcome(outcome);
    } catch (const ChannelClosed& e) {
      fail("node {}: {}; exiting", m.node_rank, e.what());
    }
    if (command.tag == kLoad && outcome.ok) log::info("node {}: ranks loaded: {}", m.node_rank, ranks.model(0).describe());
  }
  if (!failure.empty()) fail("node {}: node 0 ended the group after a failure ({})", m.node_rank, failure);
  log::info("node {}: node 0 ended the group; exiting", m.node_rank);
}

}  // namespace mx
