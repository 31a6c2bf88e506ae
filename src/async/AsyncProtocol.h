// The messages of asynchronous parameter-server training (ParameterServer <-> AsyncWorker),
// sent over a PeerChannel as a fixed header followed, for pushes and parameter replies, by
// the shard's floats.
//
// A worker's life in one segment (a stretch of training between two points where all ranks
// meet: epoch end, checkpoint, stop): kPull to every server; each server answers with its
// shard (kParams) once the staleness bound allows, server 0 adding the batch ticket to
// compute; the worker computes and sends kPush (gradient, which is also its next pull); ...
// until a reply is kEnd, then kDone to every server.
#pragma once

#include <cstdint>

namespace ringtrain::async {

constexpr int kToServerTag = 1;
constexpr int kToWorkerTag = 2;

enum class WorkerKind : std::int32_t { kPull = 1, kPush = 2, kDone = 3 };
enum class ReplyKind : std::int32_t { kParams = 1, kEnd = 2 };

// Worker -> server. A kPush is followed by the server's shard of the gradient.
struct WorkerHeader {
  WorkerKind kind = WorkerKind::kPull;
  std::int32_t stop = 0;         // 1: this worker's stop flag is set (SIGTERM)
  std::int64_t clock = 0;        // kPush: this worker's pushes in the segment before this one
  std::int64_t version = 0;      // kPush: the server's version (SSP clock) the gradient was computed at
  std::int64_t updates = 0;      // kPush: the server's update count the gradient was computed at
  std::int64_t ticket = 0;       // kPush: the batch it was computed on
  double loss_sum = 0.0;         // kPush: the batch's summed loss, correct predictions, samples
  double correct = 0.0;
  double count = 0.0;
};

// Server -> worker. A kParams reply is followed by the server's shard of the parameters.
struct ReplyHeader {
  ReplyKind kind = ReplyKind::kParams;
  std::int32_t pad = 0;
  std::int64_t version = 0;      // the SSP clock: pushes every worker has had applied
  std::int64_t updates = 0;      // optimizer updates this server has applied in total
  std::int64_t ticket = -1;      // server 0: the batch to compute next
  std::int64_t staleness = -1;   // the previous push: its clock - the version it pulled (-1: none)
  std::int64_t delay = -1;       // the previous push: updates applied between its pull and it
};

}  // namespace ringtrain::async
