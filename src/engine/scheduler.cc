#include "engine/scheduler.h"

#include <algorithm>

#include "core/error.h"

namespace mx {

int64_t SchedulerOutput::num_tokens() const {
  int64_t n = 0;
  for (const auto& s : scheduled) n += s.num_new_tokens;
  return n;
}

Scheduler::Scheduler(SchedulerConfig config, BlockManager& blocks) : config_(config), blocks_(blocks) {
  MX_CHECK(config.max_num_seqs > 0 && config.max_num_batched_tokens > 0, "scheduler limits must be positive");
}

void Scheduler::add(SequencePtr seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(std::move(seq));
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;
  schedule_running(out, budget);
  // Admitting new work in a step that had to preempt would only thrash.
  if (out.preempted.empty()) schedule_waiting(out, budget);
  return out;
}

void Scheduler::schedule_running(SchedulerOutput& out, int64_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    SequencePtr seq = running_[i];
    const int64_t num_new = std::min(seq->num_uncomputed_tokens(), budget);
    bool preempted_self = false;
    while (!blocks_.grow(*seq, seq->num_computed_tokens + num_new)) {
      preempted_self = running_.back() == seq;
      preempt_newest(out);
      if (preempted_self) break;
    }
    if (preempted_self) break;
    const bool last = seq->num_computed_tokens + num_new == seq->num_tokens();
    out.scheduled.push_back({seq, num_new, last});
    budget -= num_new;
  }
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int64_t& budget) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (budget <= 0 || int64_t(running_.size()) >= config_.max_num_seqs) break;
    SequencePtr seq = *it;
    if (waits_for_leader(*seq)) {
      ++it;
      continue;
    }
    const std::vector<int32_t> cached = blocks_.find_cached_prefix(*seq);
    const int64_t cached_tokens = int64_t(cached.size()) * blocks_.block_size();
    const int64_t num_new = std::min(seq->num_tokens() - cached_tokens, budget);
    // FCFS: a sequence that does not fit blocks the ones behind it.
    if (!blocks_.admit(*seq, cached, cached_tokens + num_new)) break;
    it = waiting_.erase(it);
    seq->status = SeqStatus::Running;
    running_.push_back(seq);
    out.scheduled.push_back({seq, num_new, cached_tokens + num_new == seq->num_tokens()});
    budget -= num_new;
  }
}

bool Scheduler::waits_for_leader(const Sequence& seq) const {
  auto leader = seq.prefill_leader.lock();
  return leader && leader->status != SeqStatus::Finished && !leader->prompt_done();
}

void Scheduler::preempt_newest(SchedulerOutput& out) {
  SequencePtr victim = running_.back();
  running_.pop_back();
  blocks_.release(*victim);
  victim->num_computed_tokens = 0;
  victim->status = SeqStatus::Waiting;
  ++victim->num_preemptions;
  waiting_.push_front(victim);
  out.preempted.push_back(victim);
}

void Scheduler::on_step_done(const SchedulerOutput& out) {
  for (const auto& s : out.scheduled) {
    s.seq->num_computed_tokens += s.num_new_tokens;
    blocks_.commit_computed(*s.seq);
  }
}

void Scheduler::remove(const SequencePtr& seq) {
  auto drop = [&](std::deque<SequencePtr>& q) {
    auto it = std::find(q.begin(), q.end(), seq);
    if (it != q.end()) q.erase(it);
  };
  drop(running_);
  drop(waiting_);
  blocks_.release(*seq);
  seq->status = SeqStatus::Finished;
}

}  // namespace mx
