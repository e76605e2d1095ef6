// The processes (nodes) of one tensor-parallel group (docs/parallel.md,
// "Multi-node"). Node 0 listens on --master-port; every other node connects
// with a control channel, says who it is and what it serves (world size, node
// count, the model's fingerprint), and is refused with the reason on any
// mismatch. Node 0 then drives the group: run_everywhere() sends a command to
// every node, runs node 0's part, and collects every node's outcome, watching
// the other nodes meanwhile so a node that fails or disappears stops node 0's
// ranks at once instead of leaving them in a collective. Nodes 1..K-1 follow:
// next_command(), run_watched() (stopped if node 0 aborts or goes away),
// send_outcome().
//
// For host-tensor ranks (--device cpu) the group also opens one channel per
// rank to rank 0 for the tcp communicator; GPU ranks get node 0's group id
// (NCCL's unique id) instead and build their communicators from it.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/tcp_channel.h"

namespace mx {

class ChannelWatch;

struct NodeGroupOptions {
  int nnodes = 1, node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  int world_size = 1;      // ranks on all nodes; world_size / nnodes per node
  double timeout_s = 300;  // to wait for every node (node 0), or for node 0 (the others), at startup
  // (what, value) pairs every node must agree on: a hash of config.json, the
  // flags that shape the weights. A node that differs is refused, naming it.
  std::vector<std::pair<std::string, std::string>> must_match;
  bool host_collectives = false;  // open the tcp communicator's channels (cpu ranks)
  // Node 0: the bytes every node gets (make_group_id()); unset: none.
  std::function<std::string()> make_group_id;
};

// How one command went on one node.
struct NodeOutcome {
  bool ok = true;
  bool primary = false;  // the node's own failure, not the echo of a peer's (a closed channel, an abort)
  bool input = false;    // an InvalidArgument (a flag or model the ranks cannot serve)
  bool lost = false;     // the node itself went away
  std::string message;
};

class NodeGroup {
 public:
  // Node 0 waits for every other node; the others connect to node 0. Throws
  // InvalidArgument for a refused node (on both sides) and mx::Error when the
  // nodes do not meet within timeout_s.
  static std::unique_ptr<NodeGroup> join(const NodeGroupOptions& options);
  ~NodeGroup();

  int nnodes() const { return options_.nnodes; }
  int node_rank() const { return options_.node_rank; }
  int world_size() const { return options_.world_size; }
  int ranks_per_node() const { return options_.world_size / options_.nnodes; }
  int first_rank() const { return options_.node_rank * ranks_per_node(); }
  const std::string& group_id() const { return group_id_; }
  // This node's ranks' tcp communicators, in local rank order (host_collectives; once).
  std::vector<std::unique_ptr<Communicator>> take_host_communicators();

  // Node 0. Sends (tag, payload) to every node, runs local() meanwhile and
  // returns every node's outcome (index: node rank; 0 is local()'s). When a
  // node fails or is lost while local() runs, on_peer_failure() is called
  // (from another thread) to stop the local ranks; after any failure every
  // node is told to abort its step.
  std::vector<NodeOutcome> run_everywhere(uint32_t tag, const std::string& payload,
                                          const std::function<NodeOutcome()>& local,
                                          const std::function<void(const std::string&)>& on_peer_failure);
  // Node 0: a command needing no answer (shutdown); nodes already gone are skipped.
  void send_to_all(uint32_t tag, const std::string& payload);
  // Node 0: between commands, a node that goes away calls on_lost(why) (from
  // another thread), so an idle server learns of it too. Set once.
  void watch_between_commands(std::function<void(const std::string&)> on_lost);

  // Nodes 1..K-1. The next command from node 0; throws ChannelClosed when node 0 went away.
  Frame next_command();
  // Runs job(); if node 0 aborts the step or goes away meanwhile,
  // on_leader_failure(why) is called (from another thread).
  NodeOutcome run_watched(const std::function<NodeOutcome()>& job,
                          const std::function<void(const std::string&)>& on_leader_failure);
  void send_outcome(const NodeOutcome& outcome);

  // Control tags used by the group itself; commands use tags >= kFirstCommandTag.
  static constexpr uint32_t kFirstCommandTag = 0x100;

 private:
  explicit NodeGroup(NodeGroupOptions options);
  void lead_bootstrap();
  void follow_bootstrap();
  void abort_all_once(bool& sent);
  void start_idle_watch();
  bool is_lost(int node);
  void set_lost(int node);

  NodeGroupOptions options_;
  std::string group_id_;
  std::vector<std::unique_ptr<TcpChannel>> control_;      // node 0: index = node rank; others: [0] = node 0
  std::vector<std::unique_ptr<TcpChannel>> rank_links_;   // host collectives: node 0: index = global rank; others: local rank
  std::mutex lost_mu_;
  std::vector<char> lost_;                                // node 0: nodes that went away
  std::function<void(const std::string&)> on_lost_between_commands_;
  std::unique_ptr<ChannelWatch> idle_watch_;              // node 0, between commands
  bool communicators_taken_ = false;
};

}  // namespace mx
