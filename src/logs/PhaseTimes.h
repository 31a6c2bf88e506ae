// Seconds per phase of one or more training steps: what a step returns, what the step
// records in rank-<r>.jsonl and the per-rank totals in summary.json add up.
#pragma once

#include "common/Json.h"

namespace ringtrain {

struct PhaseTimes {
  double data = 0, forward = 0, backward = 0;
  // allreduce: the step's communication (the loss/stop agreement and every gradient bucket)
  // from its first operation to its last; with overlap it runs beside backward.
  double allreduce = 0;
  // exposed: the part of allreduce the compute thread waited for after backward (all of it
  // without overlap). allreduce - exposed is what backward hid.
  double exposed = 0;
  double wait = 0;  // of allreduce, seconds blocked in MPI waits (Communicator::wait_seconds)
  // of allreduce, --logical-shards only: the exact sum's own work (keeping each shard's
  // gradient and max |g|, the conversion to int64 and back, the buffers' average)
  double convert = 0;
  double optimizer = 0, checkpoint = 0, eval = 0;

  PhaseTimes& operator+=(const PhaseTimes& o) {
    data += o.data;
    forward += o.forward;
    backward += o.backward;
    allreduce += o.allreduce;
    exposed += o.exposed;
    wait += o.wait;
    convert += o.convert;
    optimizer += o.optimizer;
    checkpoint += o.checkpoint;
    eval += o.eval;
    return *this;
  }

  Json to_json() const {
    Json j = Json::object();
    j.set("data", data);
    j.set("forward", forward);
    j.set("backward", backward);
    j.set("allreduce", allreduce);
    j.set("exposed_comm", exposed);
    j.set("wait", wait);
    j.set("optimizer", optimizer);
    j.set("checkpoint", checkpoint);
    j.set("eval", eval);
    return j;
  }
};

}  // namespace ringtrain
