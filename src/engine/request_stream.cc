#include "engine/request_stream.h"

namespace mx {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "error";
}

std::vector<ChoiceDelta> RequestStream::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !pending_.empty() || unfinished_ == 0; });
  std::vector<ChoiceDelta> out(std::make_move_iterator(pending_.begin()), std::make_move_iterator(pending_.end()));
  pending_.clear();
  return out;
}

bool RequestStream::done() const {
  std::lock_guard lock(mutex_);
  return unfinished_ == 0 && pending_.empty();
}

void RequestStream::push(ChoiceDelta delta) {
  {
    std::lock_guard lock(mutex_);
    if (delta.finish_reason) --unfinished_;
    pending_.push_back(std::move(delta));
  }
  ready_.notify_all();
}

}  // namespace mx
