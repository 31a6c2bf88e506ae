// Library versions for config.json.
#include "run/Versions.h"

#include <omp.h>

#include <dnnl.hpp>
#include <fmt/format.h>

namespace ringtrain {

int threads_per_rank() { return omp_get_max_threads(); }

Json versions_json(const Communicator& comm) {
  Json j = Json::object();
  j.set("ringtrain", RINGTRAIN_VERSION);
  j.set("mpi", comm.library_version());
  const dnnl_version_t* v = dnnl_version();
  j.set("onednn", fmt::format("{}.{}.{}", v->major, v->minor, v->patch));
  j.set("compiler", fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__));
  return j;
}

}  // namespace ringtrain
