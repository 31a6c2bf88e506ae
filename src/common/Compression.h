// The 16-bit formats a float vector can travel or be stored in: the all-reduce transport
// (--compress) names them, and common/HalfConvert converts to and from them.
#pragma once

#include <string_view>

namespace ringtrain {

// How vectors travel between ranks during an all-reduce. Every addition is done in fp32
// whatever the transport; 16-bit transport halves the bytes on the wire and rounds the
// partial sums to 16 bits at each hop.
enum class Compression {
  kNone,  // fp32
  kBf16,  // bfloat16: fp32's range, 8 significant bits
  kFp16,  // IEEE half: 11 significant bits, range +-65504, so values are scaled by a power of two
};

// "none" | "bf16" | "fp16"; throws std::invalid_argument otherwise.
Compression parse_compression(std::string_view name);
std::string_view compression_name(Compression compression);

}  // namespace ringtrain
