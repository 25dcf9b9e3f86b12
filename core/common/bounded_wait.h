// Waiting for work that may never finish, for a bounded time. Used where a library's teardown
// can block forever and nothing of ours depends on it finishing (libtorrent's network thread:
// p2p/swarm_session.cpp). Plain C++, no Qt, so any layer may use it.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace es {

// Runs `work` on a thread of its own and waits at most `limit` for it. True: it finished. False:
// it is still running, on a detached thread that owns whatever `work` captured — the caller must
// then end the process without static destruction (std::_Exit), which that thread may still use.
inline bool finishWithin(std::function<void()> work, std::chrono::milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread([work = std::move(work), done]() mutable {
    work();
    work = nullptr;  // what it captured dies here, before we say we are done
    done->set_value();
  }).detach();
  return finished.wait_for(limit) == std::future_status::ready;
}

}  // namespace es
