// SimRuntime: fibers on ucontext, woken by token (see SimRuntime.h).
//
// Why fibers rather than a thread per rank: the ring at 1024 ranks passes ~2 million
// messages, each a hand-over from one rank to the next. A fiber switch is a few hundred
// nanoseconds and deterministic; a thread hand-over through a condition variable costs
// microseconds of scheduler time and would make the recording depend on the OS's order.
// A fiber starts through makecontext/swapcontext once; every later switch is _setjmp /
// _longjmp, which (unlike swapcontext) saves no signal mask and so makes no system call:
// at 1024 ranks that halved the recording's time.
#include "collectives/sim/SimRuntime.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <stdexcept>
#include <string>

namespace ringtrain::sim {
namespace {

SimRuntime* g_current = nullptr;
std::uint64_t g_generations = 0;
// 512 KiB of stack per rank, reserved lazily (MAP_NORESERVE): the algorithms keep their
// buffers on the heap, and 1024 ranks then reserve 512 MiB of address space, not memory.
constexpr std::size_t kStackBytes = 512 * 1024;

}  // namespace

struct SimRuntime::MainContext {
  ucontext_t context;
  jmp_buf jump;
};

struct SimRuntime::Fiber {
  ucontext_t context;
  jmp_buf jump;
  bool started = false;
  void* stack = nullptr;
  bool done = false;
  bool queued = false;
  ~Fiber() {
    if (stack != nullptr) munmap(stack, kStackBytes);
  }
};

SimRuntime::SimRuntime(int ranks, int ranks_per_node)
    : ranks_(ranks), ranks_per_node_(ranks_per_node), main_(std::make_unique<MainContext>()) {
  if (ranks < 1 || ranks > 65535) throw std::invalid_argument("simulator: ranks must be 1..65535");
  if (ranks_per_node < 1) throw std::invalid_argument("simulator: ranks per node must be >= 1");
  if (g_current != nullptr) throw std::logic_error("simulator: one SimRuntime at a time");
  recording_.assign(static_cast<std::size_t>(ranks), false);
  schedule_.ranks = ranks;
  schedule_.ranks_per_node = ranks_per_node;
  schedule_.ops.resize(static_cast<std::size_t>(ranks));
  generation_ = ++g_generations;
  g_current = this;
}

SimRuntime::~SimRuntime() { g_current = nullptr; }

SimRuntime& SimRuntime::current() {
  if (g_current == nullptr) throw std::logic_error("simulated MPI called outside a SimRuntime");
  return *g_current;
}

void SimRuntime::fiber_entry() {
  SimRuntime& self = *g_current;
  const int rank = self.running_;
  try {
    (*self.body_)(rank);
  } catch (...) {
    if (!self.error_) self.error_ = std::current_exception();
  }
  self.fibers_[static_cast<std::size_t>(rank)]->done = true;
  _longjmp(self.main_->jump, 1);
}

void SimRuntime::switch_to(int rank) {
  running_ = rank;
  Fiber& fiber = *fibers_[static_cast<std::size_t>(rank)];
  if (_setjmp(main_->jump) == 0) {
    if (!fiber.started) {
      fiber.started = true;
      swapcontext(&main_->context, &fiber.context);
    } else {
      _longjmp(fiber.jump, 1);
    }
  }
  running_ = -1;
  if (fiber.done) {
    munmap(fiber.stack, kStackBytes);
    fiber.stack = nullptr;
  }
}

void SimRuntime::run(const std::function<void(int rank)>& body) {
  body_ = &body;
  fibers_.clear();
  for (int r = 0; r < ranks_; ++r) {
    auto fiber = std::make_unique<Fiber>();
    fiber->stack = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fiber->stack == MAP_FAILED) throw std::runtime_error("simulator: cannot map a fiber stack");
    getcontext(&fiber->context);
    fiber->context.uc_stack.ss_sp = fiber->stack;
    fiber->context.uc_stack.ss_size = kStackBytes;
    fiber->context.uc_link = nullptr;
    makecontext(&fiber->context, &SimRuntime::fiber_entry, 0);
    fiber->queued = true;
    fibers_.push_back(std::move(fiber));
    ready_.push_back(r);
  }
  while (!ready_.empty() && !error_) {
    const int rank = ready_.front();
    ready_.pop_front();
    fibers_[static_cast<std::size_t>(rank)]->queued = false;
    switch_to(rank);
  }
  if (error_) std::rethrow_exception(error_);
  for (int r = 0; r < ranks_; ++r) {
    if (!fibers_[static_cast<std::size_t>(r)]->done)
      throw std::runtime_error("simulator: the simulated ranks deadlocked (rank " +
                               std::to_string(r) + " never finished)");
  }
}

void SimRuntime::record(const Op& op) {
  if (recording()) schedule_.ops[static_cast<std::size_t>(running_)].push_back(op);
}

void SimRuntime::block_on(const void* token) {
  const int rank = running_;
  sleepers_[token].push_back(rank);
  if (_setjmp(fibers_[static_cast<std::size_t>(rank)]->jump) == 0) _longjmp(main_->jump, 1);
  running_ = rank;
}

void SimRuntime::wake(const void* token) {
  const auto it = sleepers_.find(token);
  if (it == sleepers_.end()) return;
  for (int rank : it->second) {
    Fiber& fiber = *fibers_[static_cast<std::size_t>(rank)];
    if (!fiber.queued && !fiber.done) {
      fiber.queued = true;
      ready_.push_back(rank);
    }
  }
  sleepers_.erase(it);
}

std::uint64_t SimRuntime::new_request(RequestRef::Kind kind, std::uint64_t index) {
  schedule_.requests.push_back({kind, index});
  return schedule_.requests.size() - 1;
}

std::uint64_t SimRuntime::last_signal(const void* word) const {
  const auto it = signals_.find(word);
  return it == signals_.end() ? kNoRequest : it->second;
}

std::uint64_t SimRuntime::signal(const void* word) {
  const std::uint64_t id = schedule_.signals++;
  signals_[word] = id;
  return id;
}

}  // namespace ringtrain::sim
