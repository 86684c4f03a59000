#include "services/kubecomp-sched/scheduling_queue.hpp"

#include <algorithm>

namespace kc::sched {

void SchedulingQueue::push(const Order& order) {
  const std::string& key = order.key;
  if (index_.contains(key)) {
    return;
  }
  active_.insert(order);
  index_.emplace(key, order);
}

void SchedulingQueue::remove(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) {
    return;
  }
  active_.erase(it->second);
  index_.erase(it);
}

void SchedulingQueue::unwait(const std::string& key) {
  waiting_.erase(key);
}

void SchedulingQueue::forget(const std::string& key) {
  remove(key);
  waiting_.erase(key);
  backoff_.erase(key);
}

void SchedulingQueue::backoff(const std::string& key, Clock::time_point now) {
  remove(key);
  Backoff& b = backoff_[key];
  ++b.attempts;
  const auto delay = std::min<std::chrono::milliseconds>(
      maxBackoff_, initialBackoff_ * (1LL << std::min<std::uint32_t>(b.attempts - 1, 20)));
  b.until = now + delay;
  waiting_.insert(key);
}

void SchedulingQueue::clear() {
  active_.clear();
  index_.clear();
  backoff_.clear();
  waiting_.clear();
}

std::optional<std::string> SchedulingQueue::pop() {
  if (active_.empty()) {
    return std::nullopt;
  }
  std::string key = active_.begin()->key;
  remove(key);
  return key;
}

std::set<std::string> SchedulingQueue::takeActive() {
  std::set<std::string> keys;
  for (const auto& entry : active_) {
    keys.insert(entry.key);
  }
  active_.clear();
  index_.clear();
  return keys;
}

void SchedulingQueue::release(
    Clock::time_point now, bool all,
    const std::function<std::optional<Order>(const std::string&)>& orderOf) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    auto b = backoff_.find(*it);
    std::optional<Order> order = b == backoff_.end() ? std::nullopt : orderOf(*it);
    if (!order) {
      it = waiting_.erase(it);
      continue;
    }
    if (all || b->second.until <= now) {
      push(*order);
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

SchedulingQueue::Clock::time_point SchedulingQueue::nextWake(Clock::time_point bound) const {
  for (const auto& k : waiting_) {
    if (auto b = backoff_.find(k); b != backoff_.end()) {
      bound = std::min(bound, b->second.until);
    }
  }
  return bound;
}

}  // namespace kc::sched
