// Decides what the next forward step computes. No prefill or decode phases:
// each sequence has num_computed_tokens and num_tokens, and a step gives each
// scheduled sequence a slice of its uncomputed tokens within a token budget
// (vLLM v1's rule). Running sequences go first, oldest first, so decodes and
// unfinished prompt chunks share a step; waiting sequences are admitted FCFS
// with what budget is left. When KV blocks run out, the newest running
// sequence is preempted: its blocks are released (they stay in the prefix
// cache) and it is recomputed later.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace mx {

struct SchedulerConfig {
  int64_t max_num_seqs = 256;             // sequences running at once
  int64_t max_num_batched_tokens = 2048;  // tokens computed per step
};

struct ScheduledSeq {
  SequencePtr seq;
  int64_t num_new_tokens = 0;
  bool need_logits = false;  // the slice ends at the sequence's last token
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;
  std::vector<SequencePtr> preempted;
  int64_t num_tokens() const;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, BlockManager& blocks);

  void add(SequencePtr seq);
  SchedulerOutput schedule();
  // After the step ran: the scheduled slices are computed; full blocks become shareable.
  void on_step_done(const SchedulerOutput& out);
  // Removes a sequence (finished or aborted) and releases its blocks.
  void remove(const SequencePtr& seq);

  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  int64_t num_running() const { return int64_t(running_.size()); }
  int64_t num_waiting() const { return int64_t(waiting_.size()); }

 private:
  void schedule_running(SchedulerOutput& out, int64_t& budget);
  void schedule_waiting(SchedulerOutput& out, int64_t& budget);
  bool waits_for_leader(const Sequence& seq) const;
  void preempt_newest(SchedulerOutput& out);

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::deque<SequencePtr> running_;  // oldest first
  std::deque<SequencePtr> waiting_;  // FCFS; preempted sequences return to the front
};

}  // namespace mx
