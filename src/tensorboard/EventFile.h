// One TensorBoard event file: Event protocol buffers (tensorflow/core/util/event.proto),
// encoded by hand, in TFRecord framing. TensorBoard reads every file named
// events.out.tfevents.* in a directory as one run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ringtrain {

struct Scalar {
  std::string_view tag;  // e.g. "train/loss"; '/' groups charts in TensorBoard
  double value;          // stored as a float (Summary.Value.simple_value)
};

class EventFile {
 public:
  // Creates dir if needed and a new events.out.tfevents.<unix seconds>.<host>.<pid>.<n> in it,
  // whose first record is the file_version event "brain.Event:2". Throws
  // std::runtime_error naming the path when it cannot.
  explicit EventFile(const std::filesystem::path& dir);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // One Event at step whose Summary holds every scalar; wall_time in Unix seconds.
  void write_scalars(std::int64_t step, std::span<const Scalar> scalars, double wall_time);
  // One Event at step with a text summary (TensorBoard's Text tab; markdown): a scalar
  // DT_STRING tensor tagged for the "text" plugin.
  void write_text(std::int64_t step, std::string_view tag, std::string_view text, double wall_time);
  void flush();
  const std::filesystem::path& path() const noexcept { return path_; }

  // Seconds since the Unix epoch, TensorBoard's wall_time.
  static double now();
  // TFRecord framing of one record: length (u64 LE), masked CRC-32C of the length, data,
  // masked CRC-32C of the data.
  static std::string frame(std::string_view data);

 private:
  void write_record(std::string_view data);

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

}  // namespace ringtrain
