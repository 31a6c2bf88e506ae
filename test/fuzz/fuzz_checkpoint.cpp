// libFuzzer harness: checkpoint bytes (section table, CRCs, metadata validation), then
// the loaded metadata used the way eval and resume use it.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <span>

#include "checkpoint/Checkpoint.h"
#include "checkpoint/CheckpointMeta.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto bytes = std::as_bytes(std::span(data, size));
    const ringtrain::CheckpointData ck = ringtrain::Checkpoint::deserialize(bytes, "fuzz.rtck");
    (void)ringtrain::dataset_config_of(ck.meta);
    (void)ck.meta.at("epoch").as_int();
    (void)ck.meta.at("step_in_epoch").as_int();
  } catch (const std::exception&) {
  }
  return 0;
}
