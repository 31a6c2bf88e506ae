// Names of the compression formats as the command line spells them.
#include "common/Compression.h"

#include <stdexcept>
#include <string>

namespace ringtrain {

Compression parse_compression(std::string_view name) {
  if (name == "none") return Compression::kNone;
  if (name == "bf16") return Compression::kBf16;
  if (name == "fp16") return Compression::kFp16;
  throw std::invalid_argument("unknown compression '" + std::string(name) +
                              "' (expected none, bf16 or fp16)");
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kBf16:
      return "bf16";
    case Compression::kFp16:
      return "fp16";
  }
  throw std::invalid_argument("invalid Compression value " +
                              std::to_string(static_cast<int>(compression)));
}

}  // namespace ringtrain
