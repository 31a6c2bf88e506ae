// TensorBoard event file writer: protobuf wire format by hand (varints, fixed64/fixed32,
// length-delimited fields) and TFRecord framing with masked CRC-32C.
#include "tensorboard/EventFile.h"

#include <unistd.h>

#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "tensorboard/Crc32c.h"

namespace ringtrain {
namespace {

// Field numbers of the messages written (event.proto, summary.proto).
constexpr int kEventWallTime = 1;     // double
constexpr int kEventStep = 2;         // int64
constexpr int kEventFileVersion = 3;  // string
constexpr int kEventSummary = 5;      // Summary
constexpr int kSummaryValue = 1;      // repeated Summary.Value
constexpr int kValueTag = 1;          // string
constexpr int kValueSimpleValue = 2;  // float
constexpr int kValueTensor = 8;       // TensorProto (tensor.proto)
constexpr int kValueMetadata = 9;     // SummaryMetadata
constexpr int kMetadataPluginData = 1;  // SummaryMetadata.PluginData
constexpr int kPluginName = 1;          // string
constexpr int kTensorDtype = 1;         // DataType (types.proto): DT_STRING = 7
constexpr int kTensorShape = 2;         // TensorShapeProto: empty for a scalar
constexpr int kTensorStringVal = 8;     // repeated bytes
constexpr std::uint64_t kDtString = 7;

// Wire types (protobuf encoding guide).
constexpr int kVarint = 0;
constexpr int kFixed64 = 1;
constexpr int kLengthDelimited = 2;
constexpr int kFixed32 = 5;

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<std::uint64_t>(field) << 3 | static_cast<std::uint64_t>(wire_type));
}

template <typename T>
void put_little_endian(std::string& out, T v) {
  // x86 and every platform Debian builds Open MPI for here are little-endian, as the wire
  // format is; the static_assert keeps a big-endian port from writing garbage silently.
  static_assert(std::endian::native == std::endian::little);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

std::string event_header(std::int64_t step, double wall_time) {
  std::string e;
  put_key(e, kEventWallTime, kFixed64);
  put_little_endian(e, wall_time);
  put_key(e, kEventStep, kVarint);
  put_varint(e, static_cast<std::uint64_t>(step));  // int64: negative as 10-byte two's complement
  return e;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace

EventFile::EventFile(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create directory: {}", dir.string(), ec.message()));
  // TensorBoard reads a run's files in name order; the time leads, and a counter keeps a
  // second file of the same process and second (a resume in the same process) apart.
  const auto seconds = static_cast<long long>(now());
  for (int n = 0; path_.empty() || std::filesystem::exists(path_); ++n) {
    path_ = dir / fmt::format("events.out.tfevents.{}.{}.{}.{}", seconds, host_name(), static_cast<long>(::getpid()), n);
  }
  file_ = std::fopen(path_.c_str(), "wb");
  if (file_ == nullptr) {
    throw std::runtime_error(fmt::format("{}: cannot open for writing: {}", path_.string(), std::strerror(errno)));
  }
  std::string e = event_header(0, now());
  put_bytes(e, kEventFileVersion, "brain.Event:2");
  write_record(e);
  flush();
}

EventFile::~EventFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventFile::write_scalars(std::int64_t step, std::span<const Scalar> scalars, double wall_time) {
  std::string summary;
  for (const Scalar& s : scalars) {
    std::string value;
    put_bytes(value, kValueTag, s.tag);
    put_key(value, kValueSimpleValue, kFixed32);
    put_little_endian(value, static_cast<float>(s.value));
    put_bytes(summary, kSummaryValue, value);
  }
  std::string e = event_header(step, wall_time);
  put_bytes(e, kEventSummary, summary);
  write_record(e);
}

void EventFile::write_text(std::int64_t step, std::string_view tag, std::string_view text, double wall_time) {
  std::string plugin, metadata, tensor, value, summary;
  put_bytes(plugin, kPluginName, "text");
  put_bytes(metadata, kMetadataPluginData, plugin);
  put_key(tensor, kTensorDtype, kVarint);
  put_varint(tensor, kDtString);
  put_bytes(tensor, kTensorShape, "");
  put_bytes(tensor, kTensorStringVal, text);
  put_bytes(value, kValueTag, tag);
  put_bytes(value, kValueMetadata, metadata);
  put_bytes(value, kValueTensor, tensor);
  put_bytes(summary, kSummaryValue, value);
  std::string e = event_header(step, wall_time);
  put_bytes(e, kEventSummary, summary);
  write_record(e);
}

std::string EventFile::frame(std::string_view data) {
  std::string out;
  const auto length = static_cast<std::uint64_t>(data.size());
  put_little_endian(out, length);
  put_little_endian(out, mask_crc32c(crc32c(out.data(), out.size())));
  out.append(data);
  put_little_endian(out, mask_crc32c(crc32c(data.data(), data.size())));
  return out;
}

void EventFile::write_record(std::string_view data) {
  const std::string record = frame(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    throw std::runtime_error(fmt::format("{}: write failed: {}", path_.string(), std::strerror(errno)));
  }
}

void EventFile::flush() { std::fflush(file_); }

double EventFile::now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace ringtrain
