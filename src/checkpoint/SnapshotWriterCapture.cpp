// SnapshotWriter's capture in the optimizer update (arm(), capture()): the parameters and
// the optimizer state streamed into the snapshot file block by block, CRC32s from cache.
#include "checkpoint/SnapshotWriter.h"

#include <stdexcept>

#include <fmt/format.h>

#include "checkpoint/Crc32.h"
#include "checkpoint/StreamCopy.h"

namespace ringtrain {

bool SnapshotWriter::arm(std::span<const float> params, std::span<const float> optimizer_state,
                         std::size_t buffers_bytes) {
  if (!leader_ || skip_copy_ || copy_on_thread_ || params.empty()) return false;
  if (optimizer_state.size() % params.size() != 0) return false;  // not planes of the parameters' layout
  if (kill_at_ >= 0 || slow_copy_ms_ > 0) wait_idle();            // as in take(): none skipped under a test hook
  wait_for_warm();  // done long before, as a rule: warm() comes K - 1 steps earlier
  {
    std::lock_guard lock(mutex_);
    if (writing_) return false;  // take() skips this one
  }
  try {
    layout_ = Checkpoint::layout(meta_room_, params.size_bytes(), buffers_bytes, optimizer_state.size_bytes());
    image_ = own_slots_->open(layout_.total);
  } catch (const std::exception&) {  // take() tries again and warns
    own_slots_->abandon();
    return false;
  }
  armed_ = true;
  capture_params_ = params;
  capture_state_ = optimizer_state;
  capture_planes_ = optimizer_state.size() / params.size();
  capture_buffers_ = buffers_bytes;
  cursor_ = 0;
  params_crc_ = 0;
  plane_crcs_.assign(capture_planes_, 0);
  return true;
}

void SnapshotWriter::capture(std::size_t offset, std::size_t count) {
  if (!armed_) return;
  if (offset < cursor_ || count > capture_params_.size() - offset) {
    throw std::logic_error(fmt::format("SnapshotWriter::capture: block [{}, {}) after {} of {} floats", offset,
                                       offset + count, cursor_, capture_params_.size()));
  }
  if (offset > cursor_) capture_range(cursor_, offset - cursor_);  // padding: unchanged by the update
  capture_range(offset, count);
  cursor_ = offset + count;
}

void SnapshotWriter::capture_range(std::size_t offset, std::size_t count) {
  const bool crc = !crc_on_thread_ && !skip_crc_;
  const auto put = [&](std::span<const float> from, std::size_t at, std::size_t section, std::uint32_t& sum) {
    const std::span<const std::byte> src = std::as_bytes(from.subspan(at, count));
    stream_copy(image_.data() + layout_.offset[section] + at * sizeof(float), src.data(), src.size());
    if (crc) sum = checkpoint_crc32(src, sum);  // from cache, as the copy
  };
  put(capture_params_, offset, 1, params_crc_);
  const std::size_t n = capture_params_.size();
  for (std::size_t j = 0; j < capture_planes_; ++j) put(capture_state_, j * n + offset, 3, plane_crcs_[j]);
}

void SnapshotWriter::disarm() noexcept {
  if (!armed_) return;
  armed_ = false;
  own_slots_->abandon();
}

bool SnapshotWriter::finish_capture(std::size_t meta_bytes, std::size_t buffers_bytes) {
  if (!armed_) return false;
  armed_ = false;
  // What no block reported since the last one (all of it if the update had no observer:
  // the state after the update either way).
  const std::size_t n = capture_params_.size();
  if (cursor_ < n) capture_range(cursor_, n - cursor_);
  stream_fence();  // before the lock that hands the file to the snapshot thread
  // The bytes went where the armed layout put them: usable while the metadata still fits
  // its room and the buffers their size; else take() starts over with the thread's copy.
  return meta_bytes <= meta_room_ && buffers_bytes == capture_buffers_;
}

Checkpoint::KnownCrcs SnapshotWriter::captured_crcs() const {
  Checkpoint::KnownCrcs known;
  if (crc_on_thread_) return known;
  // The state section is the planes one after another: their CRCs combined.
  std::uint32_t state = capture_planes_ > 0 ? plane_crcs_[0] : 0;
  const std::size_t plane_bytes = capture_params_.size_bytes();
  for (std::size_t j = 1; j < capture_planes_; ++j) state = checkpoint_crc32_combine(state, plane_crcs_[j], plane_bytes);
  known[1] = params_crc_;
  known[3] = state;
  return known;
}

}  // namespace ringtrain
