// A SnapshotWriter's counters as summary.json shows them.
#include "checkpoint/SnapshotStats.h"

namespace ringtrain {

Json SnapshotStats::to_json(const std::filesystem::path& dir, bool copy_on_thread) const {
  Json j = Json::object();
  j.set("dir", dir.string());
  j.set("written", written);
  j.set("skipped", skipped);
  j.set("failed", failed);
  j.set("replicated_on_next_node", replicated);
  j.set("sent_to_next_node", sent);
  j.set("received_from_previous_node", received);
  j.set("bytes", bytes);
  j.set("thread_cpu_s", thread_cpu_seconds);
  j.set("captured_in_update", captured);
  j.set("copy", copy_on_thread ? "thread" : "update");  // where the state is copied (copy_on_thread())
  j.set("fence_waits", fence_waits);
  j.set("fence_wait_s", fence_wait_seconds);
  return j;
}

}  // namespace ringtrain
