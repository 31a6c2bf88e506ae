// SIGTERM, SIGINT and SIGUSR2 (what mpirun forwards at once) as a stop request that the
// training loop polls inside each step, taken by
// one dedicated thread so that no signal handler ever runs on a compute thread's stack.
//
// Why not a handler: oneDNN 2.6.3's AVX-512 jit GEMM (Linear's inner product) points the
// stack pointer into a heap workspace while it runs, so a handler's frame written on that
// thread lands in the heap ("corrupted size vs. prev_size", oneDNN GitHub issue #4845, fixed after
// 2.6.3). With the signals blocked in every thread and taken by sigwait() in a thread of
// our own, the kernel never builds a signal frame on a compute thread.
#pragma once

namespace ringtrain {

// The exit status of `ringtrain train` stopped by a signal after its checkpoint: "resume
// me" (BSD's EX_TEMPFAIL, "try again later"), distinct from 0 (finished), 1 (runtime
// error), 2 (usage) and 128 + signal (a signal before training started, or SIGKILL).
inline constexpr int kExitStopped = 75;

// Blocks SIGTERM, SIGINT and SIGUSR2 in the calling thread, and so in every thread it starts from
// then on (OpenMP workers, MPI's progress threads inherit the mask), and starts one thread
// that takes them with sigwait() and sets the stop flag. Call it first in main(), before
// MPI_Init and before any other thread exists. Calling it again does nothing.
// Throws std::runtime_error if the mask cannot be set.
void take_stop_signals_in_thread();

// Until the training loop says it polls the flag, a stop signal ends the process at once
// (exit status 128 + signal, as the default action would): Ctrl-C during a long data load
// must not wait for the first step. From set_stop_signals_polled(true) on, a signal only
// sets the flag and the loop stops after the step with a checkpoint.
void set_stop_signals_polled(bool polled) noexcept;

// The stop flag: set by a signal (through that thread) or directly (tests).
void request_stop() noexcept;
bool stop_requested() noexcept;
void clear_stop_request() noexcept;

}  // namespace ringtrain
