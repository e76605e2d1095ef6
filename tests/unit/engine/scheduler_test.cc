#include "engine/scheduler.h"

#include <gtest/gtest.h>

namespace mx {
namespace {

SequencePtr make_seq(int64_t id, int num_tokens, int32_t first_token = 0) {
  auto s = std::make_shared<Sequence>();
  s->id = id;
  for (int i = 0; i < num_tokens; ++i) s->tokens.push_back(first_token + i);
  s->num_prompt_tokens = num_tokens;
  return s;
}

// Plays the model: marks the step computed and appends a token to every
// sequence that got logits.
void run_step(Scheduler& sched, const SchedulerOutput& out) {
  sched.on_step_done(out);
  for (const auto& s : out.scheduled)
    if (s.need_logits) s.seq->tokens.push_back(7);
}

TEST(Scheduler, ChunksPrefillsToTheTokenBudget) {
  BlockManager bm(100, 4);
  Scheduler sched({8, 10}, bm);
  auto a = make_seq(0, 25);
  sched.add(a);
  std::vector<int64_t> chunks;
  for (int step = 0; step < 3; ++step) {
    auto out = sched.schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    chunks.push_back(out.scheduled[0].num_new_tokens);
    EXPECT_EQ(out.scheduled[0].need_logits, step == 2);
    run_step(sched, out);
  }
  EXPECT_EQ(chunks, (std::vector<int64_t>{10, 10, 5}));
  auto out = sched.schedule();  // decode
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  EXPECT_TRUE(out.scheduled[0].need_logits);
}

TEST(Scheduler, MixesDecodesAndPrefillChunksInOneStep) {
  BlockManager bm(100, 4);
  Scheduler sched({8, 16}, bm);
  auto a = make_seq(0, 4);
  sched.add(a);
  run_step(sched, sched.schedule());  // a's prompt
  auto b = make_seq(1, 30, 100);
  sched.add(b);
  auto out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].seq, a);  // decode first
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[1].seq, b);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 15);  // the rest of the budget
  EXPECT_EQ(out.num_tokens(), 16);
}

TEST(Scheduler, CapsRunningSequences) {
  BlockManager bm(100, 4);
  Scheduler sched({2, 100}, bm);
  for (int i = 0; i < 3; ++i) sched.add(make_seq(i, 3, 10 * i));
  auto out = sched.schedule();
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(sched.num_running(), 2);
  EXPECT_EQ(sched.num_waiting(), 1);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockManager bm(4, 4);  // 16 token slots
  Scheduler sched({8, 100}, bm);
  auto a = make_seq(0, 8);
  auto b = make_seq(1, 8, 50);
  sched.add(a);
  sched.add(b);
  run_step(sched, sched.schedule());  // both prompts: all 4 blocks used
  EXPECT_EQ(bm.num_free_blocks(), 0);
  auto out = sched.schedule();  // a's decode needs a 5th block: b is preempted
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_EQ(out.preempted[0], b);
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, a);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->status, SeqStatus::Waiting);
  EXPECT_EQ(sched.num_waiting(), 1);
  run_step(sched, out);
  // b comes back once a finishes, recomputing its 9 tokens (prompt + generated)
  sched.remove(a);
  out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, b);
  EXPECT_EQ(out.scheduled[0].seq->num_computed_tokens + out.scheduled[0].num_new_tokens, 9);
}

TEST(Scheduler, PreemptsItselfWhenItIsTheNewest) {
  BlockManager bm(2, 4);
  Scheduler sched({8, 100}, bm);
  auto a = make_seq(0, 8);
  sched.add(a);
  run_step(sched, sched.schedule());
  auto out = sched.schedule();  // a needs a third block; nothing else to evict
  ASSERT_EQ(out.preempted.size(), 1u);
  EXPECT_TRUE(out.scheduled.empty());
  EXPECT_EQ(bm.num_free_blocks(), 2);
}

TEST(Scheduler, FollowersWaitForTheirLeadersPrompt) {
  BlockManager bm(100, 4);
  Scheduler sched({8, 4}, bm);
  auto leader = make_seq(0, 9);
  auto follower = make_seq(1, 9);
  follower->prefill_leader = leader;
  sched.add(leader);
  sched.add(follower);
  auto out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  run_step(sched, out);
  out = sched.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, leader);
  run_step(sched, out);
  run_step(sched, sched.schedule());  // leader's last prompt token
  out = sched.schedule();             // now the follower joins and reuses the 2 full blocks
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[1].seq, follower);
  EXPECT_EQ(follower->num_computed_tokens, 8);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 1);
}

}  // namespace
}  // namespace mx
