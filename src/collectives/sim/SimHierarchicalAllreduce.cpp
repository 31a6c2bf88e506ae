// HierarchicalAllreduce.cpp as it is, compiled for the simulator with its memcpy calls
// routed to ringtrain_sim_memcpy (SimKernels.cpp), so that the copies into and out of the
// shared window are recorded. Everything the file includes is included first, so the
// rename reaches only the algorithm's own code.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <stdexcept>

#include "collectives/EvenPartition.h"
#include "collectives/HierarchicalAllreduce.h"
#include "collectives/MpiCheck.h"
#include "collectives/MpiWait.h"
#include "collectives/ReduceKernels.h"
#include "collectives/SharedCounter.h"
#include "collectives/StallRecord.h"

extern "C" void* ringtrain_sim_memcpy(void* dst, const void* src, std::size_t bytes);
namespace std {
using ::ringtrain_sim_memcpy;
}  // namespace std

#define memcpy ringtrain_sim_memcpy
#include "collectives/HierarchicalAllreduce.cpp"  // NOLINT(bugprone-suspicious-include)
#undef memcpy
