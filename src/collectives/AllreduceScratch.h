// Receive and staging space the hand-written all-reduce algorithms reuse from call to
// call (grown as needed, never shrunk), owned by the communicator.
#pragma once

#include <cstdint>
#include <vector>

namespace ringtrain {

struct AllreduceScratch {
  std::vector<float> f32;          // fp32 receive buffers
  std::vector<std::uint16_t> u16;  // 16-bit transport: the wire copy and its receive buffers
};

}  // namespace ringtrain
