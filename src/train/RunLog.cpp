// Run directory writers.
#include "train/RunLog.h"

#include "train/TensorBoardLog.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {
namespace {

std::FILE* open_or_throw(const std::filesystem::path& path, const char* mode) {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (f == nullptr) {
    throw std::runtime_error(fmt::format("{}: cannot open for writing: {}", path.string(), std::strerror(errno)));
  }
  return f;
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt::format("{:.6g}", v) : std::string(); }

}  // namespace

RunLog::RunLog(const std::filesystem::path& dir, int rank, bool is_root, bool append) : dir_(dir), rank_(rank), is_root_(is_root), append_(append) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: cannot create run directory: {}", dir_.string(), ec.message()));
  rank_file_ = open_or_throw(dir_ / fmt::format("rank-{}.jsonl", rank), append ? "a" : "w");
  if (is_root_) {
    const auto metrics_path = dir_ / "metrics.csv";
    const bool exists = append && std::filesystem::exists(metrics_path);
    metrics_file_ = open_or_throw(metrics_path, append ? "a" : "w");
    if (!exists) {
      std::fputs("epoch,step,lr,train_loss,train_accuracy,test_loss,test_accuracy,elapsed_s,images_per_s\n",
                 metrics_file_);
    }
  }
}

RunLog::~RunLog() {
  if (rank_file_ != nullptr) std::fclose(rank_file_);
  if (metrics_file_ != nullptr) std::fclose(metrics_file_);
}

void RunLog::open_tensorboard(int world) {
  tensorboard_ = std::make_unique<TensorBoardLog>(dir_, rank_, world, append_);
}

void RunLog::record(const Json& line) {
  const std::string text = line.dump();
  std::fwrite(text.data(), 1, text.size(), rank_file_);
  std::fputc('\n', rank_file_);
  if (tensorboard_) tensorboard_->record(line);
}

void RunLog::metrics(const EpochMetrics& m) {
  if (metrics_file_ == nullptr) return;
  fmt::print(metrics_file_, "{},{},{},{},{},{},{},{},{}\n", m.epoch, m.step, csv_number(m.lr),
             csv_number(m.train_loss), csv_number(m.train_accuracy), csv_number(m.test_loss),
             csv_number(m.test_accuracy), csv_number(m.elapsed_s), csv_number(m.images_per_s));
  std::fflush(metrics_file_);
  if (tensorboard_) tensorboard_->metrics(m);
}

void RunLog::write_json(const std::string& file_name, const Json& value) const {
  write_text(file_name, value.dump(2) + "\n");
}

// Temporary file then rename: a reader never sees half a file.
void RunLog::write_text(const std::string& file_name, const std::string& text) const {
  const auto path = dir_ / file_name;
  const auto tmp = dir_ / (file_name + ".tmp");
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error(fmt::format("{}: cannot open for writing", tmp.string()));
    out << text;
    if (!out) throw std::runtime_error(fmt::format("{}: write failed", tmp.string()));
  }
  std::filesystem::rename(tmp, path);
}

void RunLog::flush() {
  if (rank_file_ != nullptr) std::fflush(rank_file_);
  if (metrics_file_ != nullptr) std::fflush(metrics_file_);
  if (tensorboard_) tensorboard_->flush();
}

}  // namespace ringtrain
