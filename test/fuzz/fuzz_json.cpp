// libFuzzer harness: the JSON parser and the JSON Lines reader of the run logs. A value
// that parses must dump to text that parses again, and from then on the dump is stable
// (one round may normalise: 1.0 dumps as 1 and comes back an integer).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "common/Json.h"
#include "logs/JsonLines.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const ringtrain::Json value = ringtrain::Json::parse(text);
    const std::string twice = ringtrain::Json::parse(value.dump()).dump();
    if (ringtrain::Json::parse(twice).dump() != twice) std::abort();
    if (ringtrain::Json::parse(value.dump(2)).dump() != twice) std::abort();
    if (value.is_number()) {
      (void)value.as_double();
      try {
        (void)value.as_int();
      } catch (const std::exception&) {
      }
    }
  } catch (const std::exception&) {
  }
  try {
    std::vector<std::string> warnings;
    (void)ringtrain::parse_json_lines(text, "fuzz.jsonl", warnings);
  } catch (const std::exception&) {
  }
  return 0;
}
