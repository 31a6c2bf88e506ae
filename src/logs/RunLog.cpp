// Run directory writers.
#include "logs/RunLog.h"


#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "logs/JsonLines.h"

namespace ringtrain {
namespace {

std::FILE* open_or_throw(const std::filesystem::path& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) {
    throw std::runtime_error(fmt::format("{}: cannot open for writing: {}", path.string(), std::strerror(errno)));
  }
  return f;
}

// A failed write (a full disk, a quota, an I/O error) ends the run with the file's path:
// logs that silently stop, or stop mid-record, would be read later as the whole truth.
// stdio reports most errors only when its buffer reaches the file, so flushes are
// checked too.
[[noreturn]] void throw_write_error(const std::filesystem::path& path, int err) {
  throw std::runtime_error(fmt::format("{}: write failed: {}", path.string(), std::strerror(err != 0 ? err : EIO)));
}

void write_or_throw(std::FILE* f, const std::string& text, const std::filesystem::path& path) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::ferror(f)) throw_write_error(path, errno);
}

void flush_or_throw(std::FILE* f, const std::filesystem::path& path) {
  errno = 0;
  if (std::fflush(f) != 0 || std::ferror(f)) throw_write_error(path, errno);
}

// A log an interrupted run (SIGKILL) left may end inside a record. Appending after it would
// glue the next record onto the torn one and corrupt both, so the torn tail is cut away
// first. Returns how many bytes were dropped.
std::uint64_t drop_torn_last_line(const std::filesystem::path& path) {
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return 0;
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(size - 1));
  if (in.get() == '\n') return 0;
  in.seekg(0);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t keep = complete_lines_length(text);
  std::filesystem::resize_file(path, keep, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot cut its torn last line: {}", path.string(), ec.message()));
  return size - keep;
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); }

}  // namespace

RunLog::RunLog(const std::filesystem::path& dir, int rank, bool is_root, bool append)
    : dir_(dir), rank_(rank), is_root_(is_root), append_(append), rank_path_(dir / fmt::format("rank-{}.jsonl", rank)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create run directory: {}", dir_.string(), ec.message()));
  const std::uint64_t dropped = append ? drop_torn_last_line(rank_path_) : 0;
  rank_file_ = open_or_throw(rank_path_, append ? "a" : "w");
  if (dropped > 0) {
    Json note = Json::object();
    note.set("type", "event");
    note.set("message", fmt::format("dropped the torn last line ({} bytes) that the interrupted run left", dropped));
    record(note);
  }
  if (is_root_) {
    metrics_path_ = dir_ / "metrics.csv";
    const bool exists = append && std::filesystem::exists(metrics_path_);
    metrics_file_ = open_or_throw(metrics_path_, append ? "a" : "w");
    if (!exists) {
      write_or_throw(metrics_file_,
                     "epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,elapsed_s,images_per_s\n",
                     metrics_path_);
      flush_or_throw(metrics_file_, metrics_path_);
    }
  }
}

RunLog::~RunLog() {
  // Errors here cannot be reported (this may run while an exception unwinds); the run's
  // last flush() has already checked that everything reached the files.
  if (rank_file_ != nullptr) std::fclose(rank_file_);
  if (metrics_file_ != nullptr) std::fclose(metrics_file_);
}

void RunLog::add_sink(std::unique_ptr<RunLogSink> sink) { sinks_.push_back(std::move(sink)); }

void RunLog::record(const Json& line) {
  write_or_throw(rank_file_, line.dump() + "\n", rank_path_);
  for (auto& sink : sinks_) sink->record(line);
}

void RunLog::metrics(const EpochMetrics& m) {
  if (metrics_file_ == nullptr) return;
  write_or_throw(metrics_file_,
                 fmt::format("{},{},{},{},{},{},{},{},{}\n", m.epoch, m.step, csv_number(m.lr),
                             csv_number(m.train_loss), csv_number(m.train_accuracy), csv_number(m.test_loss),
                             csv_number(m.test_accuracy), csv_number(m.elapsed_s), csv_number(m.images_per_s)),
                 metrics_path_);
  flush_or_throw(metrics_file_, metrics_path_);
  for (auto& sink : sinks_) sink->metrics(m);
}

void RunLog::write_json(const std::string& file_name, const Json& value) const {
  write_text(file_name, value.dump(2) + "\n");
}

// Temporary file then rename: a reader never sees half a file.
void RunLog::write_text(const std::string& file_name, const std::string& text) const {
  const auto path = dir_ / file_name;
  const auto tmp = dir_ / (file_name + ".tmp");
  std::FILE* f = open_or_throw(tmp, "w");
  // Any failure removes the partial .tmp: nothing half-written stays in the run directory.
  try {
    write_or_throw(f, text, tmp);
    flush_or_throw(f, tmp);
  } catch (...) {
    std::fclose(f);
    std::filesystem::remove(tmp);
    throw;
  }
  errno = 0;
  if (std::fclose(f) != 0) {
    const int err = errno;
    std::filesystem::remove(tmp);
    throw_write_error(tmp, err);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw std::runtime_error(fmt::format("{}: cannot rename {} onto it: {}", path.string(), tmp.filename().string(),
                                         ec.message()));
  }
}

void RunLog::flush() {
  if (rank_file_ != nullptr) flush_or_throw(rank_file_, rank_path_);
  if (metrics_file_ != nullptr) flush_or_throw(metrics_file_, metrics_path_);
  for (auto& sink : sinks_) sink->flush();
}

}  // namespace ringtrain
