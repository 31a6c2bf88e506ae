// StallStatus: its wire form and its words.
#include "collectives/StallStatus.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

namespace ringtrain {
namespace {

constexpr std::size_t kPhaseBytes = 24;
constexpr std::size_t kOperationBytes = 40;
constexpr std::size_t kWhatBytes = 24;

class Writer {
 public:
  explicit Writer(std::span<std::byte> out) : out_(out) { std::fill(out.begin(), out.end(), std::byte{0}); }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[pos_++] = static_cast<std::byte>(v >> (8 * i));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[pos_++] = static_cast<std::byte>(v >> (8 * i));
  }
  void text(const std::string& s, std::size_t width) {  // cut to width - 1, NUL-padded
    std::memcpy(out_.data() + pos_, s.data(), std::min(s.size(), width - 1));
    pos_ += width;
  }

 private:
  std::span<std::byte> out_;
  std::size_t pos_ = 0;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(in_[pos_++]) << (8 * i);
    return v;
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(in_[pos_++]) << (8 * i);
    return v;
  }
  // Printable ASCII up to the first NUL; anything else becomes '?' (the text reaches a
  // terminal and a log).
  std::string text(std::size_t width) {
    std::string s;
    for (std::size_t i = 0; i < width - 1; ++i) {
      const auto c = static_cast<unsigned char>(in_[pos_ + i]);
      if (c == 0) break;
      s.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
    }
    pos_ += width;
    return s;
  }

 private:
  std::span<const std::byte> in_;
  std::size_t pos_ = 0;
};

std::uint32_t millis(double s) { return static_cast<std::uint32_t>(std::clamp(s, 0.0, 4.0e6) * 1000.0); }

}  // namespace

StallStatus StallStatus::from(const StallRecord::Snapshot& s, double wait_s, double still_s) {
  StallStatus st;
  st.step = s.step;
  st.bucket = s.bucket;
  st.buckets = s.buckets;
  st.peer = s.peer;
  st.waiting = s.waiting;
  st.wait_s = s.waiting ? wait_s : 0.0;
  st.still_s = still_s;
  st.phase = s.phase;
  st.operation = s.operation;
  st.what = s.what;
  return st;
}

void StallStatus::encode(std::span<std::byte, kWireBytes> out) const {
  Writer w(out);
  w.u64(static_cast<std::uint64_t>(step));
  w.u32(static_cast<std::uint32_t>(bucket));
  w.u32(static_cast<std::uint32_t>(buckets));
  w.u32(static_cast<std::uint32_t>(peer));
  w.u32(waiting ? 1U : 0U);
  w.u32(millis(wait_s));
  w.u32(millis(still_s));
  w.text(phase, kPhaseBytes);
  w.text(operation, kOperationBytes);
  w.text(what, kWhatBytes);
}

StallStatus StallStatus::decode(std::span<const std::byte, kWireBytes> in) {
  Reader r(in);
  StallStatus st;
  st.step = static_cast<std::int64_t>(r.u64());
  st.bucket = static_cast<int>(r.u32());
  st.buckets = static_cast<int>(r.u32());
  st.peer = static_cast<int>(r.u32());
  st.waiting = r.u32() != 0;
  st.wait_s = r.u32() / 1000.0;
  st.still_s = r.u32() / 1000.0;
  st.phase = r.text(kPhaseBytes);
  st.operation = r.text(kOperationBytes);
  st.what = r.text(kWhatBytes);
  return st;
}

std::string StallStatus::where() const {
  std::string s = step > 0 ? fmt::format("step {}", step) : std::string();
  if (!phase.empty()) s += (s.empty() ? "" : ", ") + phase;
  if (!s.empty()) s += ",";
  if (waiting) {
    s += fmt::format(" in {} ({}", operation.empty() ? std::string("an MPI wait") : operation, what);
    if (bucket >= 0) s += fmt::format(", bucket {} of {}", bucket + 1, buckets);
    s += peer == StallRecord::kAllRanks ? std::string(") waiting for every rank") : fmt::format(") waiting for rank {}", peer);
    s += fmt::format(" for {:.1f} s", wait_s);
  } else {
    // Not "computing": outside MPI a rank may as well be loading data or writing a file.
    s += fmt::format(" outside MPI for {:.1f} s", still_s);
  }
  return s;
}

}  // namespace ringtrain
