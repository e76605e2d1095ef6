#include "dist/node_group.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "dist/tcp_communicator.h"
#include "dist/wire.h"

namespace mx {

namespace {

constexpr uint32_t kMagic = 0x4d584e47;  // "MXNG"
constexpr uint32_t kVersion = 1;
enum Tag : uint32_t { kHello = 1, kWelcome = 2, kOutcome = 3, kAbort = 4 };
enum HelloKind : uint8_t { kControl = 0, kRankLink = 1 };

struct Hello {
  HelloKind kind = kControl;
  int32_t node_rank = 0, nnodes = 0, world_size = 0, rank = 0;
  std::vector<std::pair<std::string, std::string>> must_match;
};

std::string encode(const Hello& h) {
  wire::Writer w;
  w.pod(kMagic);
  w.pod(kVersion);
  w.pod(uint8_t(h.kind));
  w.pod(h.node_rank);
  w.pod(h.nnodes);
  w.pod(h.world_size);
  w.pod(h.rank);
  w.pod(uint64_t(h.must_match.size()));
  for (const auto& [k, v] : h.must_match) {
    w.str(k);
    w.str(v);
  }
  return w.take();
}

Hello decode_hello(const std::string& bytes) {
  wire::Reader r(bytes, "node hello");
  if (r.pod<uint32_t>() != kMagic) fail("not an mxserve node (bad magic)");
  if (const auto v = r.pod<uint32_t>(); v != kVersion) fail("protocol version {} (this node speaks {})", v, kVersion);
  Hello h;
  h.kind = HelloKind(r.pod<uint8_t>());
  h.node_rank = r.pod<int32_t>();
  h.nnodes = r.pod<int32_t>();
  h.world_size = r.pod<int32_t>();
  h.rank = r.pod<int32_t>();
  const auto n = r.pod<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    std::string k = r.str();
    h.must_match.emplace_back(std::move(k), r.str());
  }
  r.finish();
  return h;
}

std::string encode(const NodeOutcome& o) {
  wire::Writer w;
  w.pod(uint8_t(o.ok));
  w.pod(uint8_t(o.primary));
  w.pod(uint8_t(o.input));
  w.str(o.message);
  return w.take();
}

NodeOutcome decode_outcome(const std::string& bytes) {
  wire::Reader r(bytes, "node outcome");
  NodeOutcome o;
  o.ok = r.pod<uint8_t>() != 0;
  o.primary = r.pod<uint8_t>() != 0;
  o.input = r.pod<uint8_t>() != 0;
  o.message = r.str();
  r.finish();
  return o;
}

NodeOutcome lost_node(int node, const std::string& why) {
  return NodeOutcome{false, false, false, true, fmt::format("node {} is gone: {}", node, why)};
}

double seconds_left(std::chrono::steady_clock::time_point deadline) {
  return std::max(0.0, std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count());
}

}  // namespace

// A thread that waits for the first frame (or the closing) of each channel,
// hands it to on_event and stops watching that channel; stopped when destroyed.
class ChannelWatch {
 public:
  using Event = std::function<void(size_t index, std::optional<Frame> frame, const std::string& error)>;
  ChannelWatch(std::vector<TcpChannel*> channels, Event on_event)
      : channels_(std::move(channels)), on_event_(std::move(on_event)) {
    if (::pipe2(stop_, O_CLOEXEC) != 0) fail("pipe: {}", std::strerror(errno));
    thread_ = std::thread([this] { loop(); });
  }
  ~ChannelWatch() {
    const char c = 0;
    (void)!::write(stop_[1], &c, 1);
    thread_.join();
    ::close(stop_[0]);
    ::close(stop_[1]);
  }

 private:
  void loop() {
    std::vector<bool> done(channels_.size());
    for (size_t i = 0; i < channels_.size(); ++i) done[i] = channels_[i] == nullptr;
    for (;;) {
      std::vector<pollfd> fds{{stop_[0], POLLIN, 0}};
      std::vector<size_t> index;
      for (size_t i = 0; i < channels_.size(); ++i)
        if (!done[i]) {
          fds.push_back({channels_[i]->fd(), POLLIN, 0});
          index.push_back(i);
        }
      if (index.empty()) return;
      if (::poll(fds.data(), fds.size(), -1) < 0) continue;  // EINTR
      if (fds[0].revents) return;
      for (size_t k = 1; k < fds.size(); ++k) {
        if (!fds[k].revents) continue;
        const size_t i = index[k - 1];
        done[i] = true;
        try {
          on_event_(i, channels_[i]->receive(), "");
        } catch (const ChannelClosed& e) {
          on_event_(i, std::nullopt, e.what());
        }
      }
    }
  }

  std::vector<TcpChannel*> channels_;
  Event on_event_;
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

std::unique_ptr<NodeGroup> NodeGroup::join(const NodeGroupOptions& options) {
  const NodeGroupOptions& o = options;
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes)
    fail_input("--node-rank {} of --nnodes {}: the node rank must be in [0, {})", o.node_rank, o.nnodes, o.nnodes);
  if (o.world_size < o.nnodes || o.world_size % o.nnodes != 0)
    fail_input("--tensor-parallel-size {} over --nnodes {}: every node needs the same number of ranks (a multiple)",
               o.world_size, o.nnodes);
  std::unique_ptr<NodeGroup> group(new NodeGroup(options));
  if (o.node_rank == 0)
    group->lead_bootstrap();
  else
    group->follow_bootstrap();
  return group;
}

NodeGroup::NodeGroup(NodeGroupOptions options) : options_(std::move(options)) {}

NodeGroup::~NodeGroup() { idle_watch_.reset(); }

bool NodeGroup::is_lost(int node) {
  std::lock_guard lock(lost_mu_);
  return lost_[size_t(node)] != 0;
}

void NodeGroup::set_lost(int node) {
  std::lock_guard lock(lost_mu_);
  lost_[size_t(node)] = 1;
}

void NodeGroup::watch_between_commands(std::function<void(const std::string&)> on_lost) {
  MX_CHECK(node_rank() == 0 && !on_lost_between_commands_, "watch_between_commands: node 0, once");
  on_lost_between_commands_ = std::move(on_lost);
  start_idle_watch();
}

// Other nodes send nothing between commands: anything there is a node that
// went away (or a broken one).
void NodeGroup::start_idle_watch() {
  if (!on_lost_between_commands_) return;
  std::vector<TcpChannel*> watched(static_cast<size_t>(nnodes()), nullptr);
  for (int n = 1; n < nnodes(); ++n)
    if (!is_lost(n)) watched[size_t(n)] = control_[size_t(n)].get();
  idle_watch_ = std::make_unique<ChannelWatch>(watched, [this](size_t n, std::optional<Frame> frame, const std::string& error) {
    set_lost(int(n));
    const NodeOutcome lost = lost_node(int(n), frame ? fmt::format("it sent tag {:#x} between commands", frame->tag) : error);
    log::error("{}", lost.message);
    on_lost_between_commands_(lost.message);
  });
}

void NodeGroup::lead_bootstrap() {
  const NodeGroupOptions& o = options_;
  const int per_node = ranks_per_node();
  group_id_ = o.make_group_id ? o.make_group_id() : std::string();
  control_.resize(size_t(o.nnodes));
  lost_.assign(size_t(o.nnodes), 0);
  rank_links_.resize(size_t(o.world_size));
  TcpListener listener(o.master_port);
  log::info("node 0: waiting on port {} for {} more node(s) ({} ranks each, {} in all)", listener.port(), o.nnodes - 1,
            per_node, o.world_size);
  int missing = (o.nnodes - 1) * (1 + (o.host_collectives ? per_node : 0));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(o.timeout_s));
  while (missing > 0) {
    auto ch = listener.accept(seconds_left(deadline));
    if (!ch) {
      std::string absent;
      for (int n = 1; n < o.nnodes; ++n)
        if (!control_[size_t(n)]) absent += fmt::format("{}{}", absent.empty() ? "" : ", ", n);
      fail("node 0: the group did not form within {} s on port {} (nodes not joined: {}; start them with "
           "--node-rank N --master-addr <this host> --master-port {})", o.timeout_s, listener.port(),
           absent.empty() ? "none, but some rank links" : absent, listener.port());
    }
    Hello h;
    try {
      ch->set_receive_timeout(std::min(10.0, std::max(1.0, seconds_left(deadline))));
      h = decode_hello(ch->receive_expect(kHello, "a node hello"));
      ch->set_receive_timeout(0);
    } catch (const Error& e) {
      log::warn("node 0: ignored a connection from {}: {}", ch->peer(), e.what());
      continue;
    }
    const std::string where = ch->remote_address();
    std::string refusal;
    if (h.nnodes != o.nnodes || h.world_size != o.world_size)
      refusal = fmt::format("node {} was started with --nnodes {} and {} ranks in all; node 0 has --nnodes {} and {} "
                            "ranks", h.node_rank, h.nnodes, h.world_size, o.nnodes, o.world_size);
    else if (h.node_rank < 1 || h.node_rank >= o.nnodes)
      refusal = fmt::format("node rank {} is outside 1..{}", h.node_rank, o.nnodes - 1);
    else if (h.kind == kControl && control_[size_t(h.node_rank)])
      refusal = fmt::format("node rank {} joined twice (each node needs its own --node-rank)", h.node_rank);
    else if (h.kind == kRankLink && (!o.host_collectives || !control_[size_t(h.node_rank)] ||
                                     h.rank / per_node != h.node_rank || rank_links_[size_t(h.rank)]))
      refusal = fmt::format("unexpected rank link for rank {} from node {}", h.rank, h.node_rank);
    for (size_t i = 0; refusal.empty() && h.kind == kControl && i < o.must_match.size(); ++i) {
      const auto& [what, ours] = o.must_match[i];
      const auto it = std::find_if(h.must_match.begin(), h.must_match.end(), [&](auto& kv) { return kv.first == what; });
      const std::string theirs = it == h.must_match.end() ? "(not sent)" : it->second;
      if (theirs != ours)
        refusal = fmt::format("node {} does not serve what node 0 serves: its {} is {}, node 0's is {} (every node "
                              "needs the same model and flags)", h.node_rank, what, theirs, ours);
    }
    if (!refusal.empty()) {
      try {
        ch->send(TcpChannel::kErrorTag, refusal);
      } catch (const ChannelClosed&) {
      }
      fail_input("node 0: refused {}: {}", where, refusal);
    }
    if (h.kind == kControl) {
      ch->set_peer(fmt::format("node {} at {}", h.node_rank, where));
      wire::Writer w;
      w.str(group_id_);
      ch->send(kWelcome, w.bytes());
      log::info("node 0: node {} at {} joined", h.node_rank, where);
      control_[size_t(h.node_rank)] = std::move(ch);
    } else {
      ch->set_peer(fmt::format("rank {} (node {} at {})", h.rank, h.node_rank, where));
      rank_links_[size_t(h.rank)] = std::move(ch);
    }
    --missing;
  }
  log::info("node 0: all {} nodes joined ({} ranks)", o.nnodes, o.world_size);
}

void NodeGroup::follow_bootstrap() {
  const NodeGroupOptions& o = options_;
  const std::string leader = fmt::format("node 0 at {}:{}", o.master_addr, o.master_port);
  auto ctl = connect_tcp(o.master_addr, o.master_port, o.timeout_s, leader);
  Hello h{kControl, o.node_rank, o.nnodes, o.world_size, 0, o.must_match};
  ctl->send(kHello, encode(h));
  ctl->set_receive_timeout(o.timeout_s);
  std::string welcome;
  try {
    welcome = ctl->receive_expect(kWelcome, "the welcome of node 0");
  } catch (const ChannelClosed&) {
    throw;
  } catch (const Error& e) {
    fail_input("node {}: node 0 refused this node: {}", o.node_rank, e.what());
  }
  ctl->set_receive_timeout(0);
  wire::Reader r(welcome, "node welcome");
  group_id_ = r.str();
  r.finish();
  control_.push_back(std::move(ctl));
  if (o.host_collectives)
    for (int i = 0; i < ranks_per_node(); ++i) {
      auto link = connect_tcp(o.master_addr, o.master_port, o.timeout_s, fmt::format("rank 0 ({})", leader));
      link->send(kHello, encode(Hello{kRankLink, o.node_rank, o.nnodes, o.world_size, first_rank() + i, {}}));
      rank_links_.push_back(std::move(link));
    }
  log::info("node {}: joined {} (ranks {}..{} of {})", o.node_rank, leader, first_rank(),
            first_rank() + ranks_per_node() - 1, o.world_size);
}

std::vector<std::unique_ptr<Communicator>> NodeGroup::take_host_communicators() {
  if (!options_.host_collectives || communicators_taken_)
    fail("node group: no host communicators to take (cpu ranks only, once)");
  communicators_taken_ = true;
  const int per_node = ranks_per_node();
  std::vector<std::unique_ptr<Communicator>> comms;
  if (node_rank() != 0) {
    for (int i = 0; i < per_node; ++i) {
      std::vector<std::unique_ptr<TcpChannel>> one;
      one.push_back(std::move(rank_links_[size_t(i)]));
      comms.push_back(make_tcp_communicator(first_rank() + i, world_size(), std::move(one)));
    }
    return comms;
  }
  // Node 0's own ranks reach rank 0 over socket pairs.
  comms.resize(size_t(per_node));
  for (int r = 1; r < per_node; ++r) {
    auto [at_root, at_rank] = channel_pair("rank 0", fmt::format("rank {}", r));
    rank_links_[size_t(r)] = std::move(at_root);
    std::vector<std::unique_ptr<TcpChannel>> one;
    one.push_back(std::move(at_rank));
    comms[size_t(r)] = make_tcp_communicator(r, world_size(), std::move(one));
  }
  comms[0] = make_tcp_communicator(0, world_size(), std::move(rank_links_));
  return comms;
}

void NodeGroup::abort_all_once(bool& sent) {
  if (sent) return;
  sent = true;
  for (int n = 1; n < nnodes(); ++n)
    if (!is_lost(n)) try {
        control_[size_t(n)]->send(kAbort, "");
      } catch (const ChannelClosed&) {
      }
}

std::vector<NodeOutcome> NodeGroup::run_everywhere(uint32_t tag, const std::string& payload,
                                                   const std::function<NodeOutcome()>& local,
                                                   const std::function<void(const std::string&)>& on_peer_failure) {
  MX_CHECK(node_rank() == 0, "run_everywhere on node {}", node_rank());
  idle_watch_.reset();
  std::vector<std::optional<NodeOutcome>> outcomes(static_cast<size_t>(nnodes()));
  std::vector<TcpChannel*> watched(static_cast<size_t>(nnodes()), nullptr);
  for (int n = 1; n < nnodes(); ++n) {
    if (!is_lost(n)) try {
        control_[size_t(n)]->send(tag, payload);
        watched[size_t(n)] = control_[size_t(n)].get();
        continue;
      } catch (const ChannelClosed& e) {
        set_lost(n);
        outcomes[size_t(n)] = lost_node(n, e.what());
      }
    if (!outcomes[size_t(n)]) outcomes[size_t(n)] = lost_node(n, "it left earlier");
  }
  for (int n = 1; n < nnodes(); ++n)  // a node already gone: the local ranks must not wait for it
    if (outcomes[size_t(n)]) on_peer_failure(outcomes[size_t(n)]->message);
  std::mutex mu;
  auto take = [&](size_t n, std::optional<Frame> frame, const std::string& error) {
    NodeOutcome got;
    if (!frame) got = lost_node(int(n), error);
    else if (frame->tag == kOutcome) got = decode_outcome(frame->payload);
    else got = NodeOutcome{false, true, false, false, fmt::format("node {} answered tag {:#x}", n, frame->tag)};
    {
      std::lock_guard lock(mu);
      if (got.lost) set_lost(int(n));
      outcomes[n] = got;
    }
    if (!got.ok) on_peer_failure(got.message);
  };
  {
    ChannelWatch watch(watched, take);
    outcomes[0] = local();
  }
  bool abort_sent = false;
  for (int n = 0; n < nnodes(); ++n)
    if (outcomes[size_t(n)] && !outcomes[size_t(n)]->ok) abort_all_once(abort_sent);
  for (int n = 1; n < nnodes(); ++n) {
    if (outcomes[size_t(n)]) continue;
    try {
      take(size_t(n), control_[size_t(n)]->receive(), "");
    } catch (const ChannelClosed& e) {
      take(size_t(n), std::nullopt, e.what());
    }
    if (!outcomes[size_t(n)]->ok) abort_all_once(abort_sent);
  }
  std::vector<NodeOutcome> all;
  for (auto& o : outcomes) all.push_back(*o);
  start_idle_watch();
  return all;
}

void NodeGroup::send_to_all(uint32_t tag, const std::string& payload) {
  idle_watch_.reset();  // the nodes are told to go: their leaving is no failure
  for (int n = 1; n < nnodes(); ++n)
    if (!is_lost(n)) try {
        control_[size_t(n)]->send(tag, payload);
      } catch (const ChannelClosed&) {
        set_lost(n);
      }
}

Frame NodeGroup::next_command() {
  for (;;) {
    Frame f = control_[0]->receive();
    if (f.tag != kAbort) return f;  // an abort that came after this node's step had ended
  }
}

NodeOutcome NodeGroup::run_watched(const std::function<NodeOutcome()>& job,
                                   const std::function<void(const std::string&)>& on_leader_failure) {
  ChannelWatch watch({control_[0].get()}, [&](size_t, std::optional<Frame> frame, const std::string& error) {
    on_leader_failure(frame ? std::string("node 0 stopped the step (another node failed)") : error);
  });
  return job();
}

void NodeGroup::send_outcome(const NodeOutcome& outcome) { control_[0]->send(kOutcome, encode(outcome)); }

}  // namespace mx
