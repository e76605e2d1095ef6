// A communicator whose ranks are in different processes (nodes), for host
// tensors (the CPU backend): every rank r > 0 has one channel to rank 0;
// rank 0 gathers the ranks' inputs in rank order, computes the result exactly
// as LocalGroup does (sums start from zero and add rank 0, 1, ... in turn) and
// sends it back, so every rank, and a single-process run, hold bitwise the
// same values. Simple and exact rather than fast: the GPU path is NCCL.
// A peer that disconnects makes every collective waiting on it throw
// ChannelClosed naming that rank; abort() shuts this rank's sockets so its
// peers see the same.
#pragma once
#include <memory>
#include <vector>

#include "dist/communicator.h"
#include "dist/tcp_channel.h"

namespace mx {

// Rank 0: `peers` has world_size entries, the channel to rank r at index r
// (index 0 empty). Rank r > 0: one entry, the channel to rank 0.
std::unique_ptr<Communicator> make_tcp_communicator(int rank, int world_size,
                                                    std::vector<std::unique_ptr<TcpChannel>> peers);

// world_size ranks of one process joined by socket pairs (tests, and the
// ranks of node 0 talking to its rank 0).
std::vector<std::unique_ptr<Communicator>> make_tcp_group_in_process(int world_size);

}  // namespace mx
