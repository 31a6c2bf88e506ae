// Rank-0-reads-then-broadcasts checkpoint loading.
#include "checkpoint/CheckpointIo.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "nn/Model.h"
#include "common/CollectiveError.h"

namespace ringtrain {
namespace {

void broadcast_bytes(Communicator& comm, std::vector<std::byte>& bytes, int root) {
  std::uint64_t size = bytes.size();
  comm.broadcast(std::as_writable_bytes(std::span(&size, 1)), root);
  bytes.resize(size);
  // Large checkpoints go in pieces: MPI counts are int.
  constexpr std::size_t kPiece = 1u << 30;
  for (std::size_t pos = 0; pos < bytes.size(); pos += kPiece) {
    comm.broadcast(std::span(bytes).subspan(pos, std::min(kPiece, bytes.size() - pos)), root);
  }
}

}  // namespace

std::string broadcast_string(Communicator& comm, const std::string& value, int root) {
  std::vector<std::byte> bytes(value.size());
  if (!value.empty()) std::memcpy(bytes.data(), value.data(), value.size());
  broadcast_bytes(comm, bytes, root);
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

CheckpointData load_checkpoint_collective(Communicator& comm, const std::filesystem::path& path) {
  std::vector<std::byte> bytes;
  std::string error;
  if (comm.rank() == 0) {
    try {
      bytes = Checkpoint::read_file(path);
      (void)Checkpoint::deserialize(bytes, path.string());
    } catch (const std::exception& e) {
      error = e.what();
      bytes.clear();
    }
  }
  error = broadcast_string(comm, error, 0);
  if (!error.empty()) throw CollectiveError(error);
  broadcast_bytes(comm, bytes, 0);
  return Checkpoint::deserialize(bytes, path.string());
}

void check_checkpoint_matches(const CheckpointData& ck, const Model& model, const std::string& source) {
  const std::string model_name = ck.meta.at("model").as_string();
  if (ck.meta.at("signature").as_string() != model.signature()) {
    throw CollectiveError(fmt::format(
        "{}: meta: checkpoint is of model '{}' ({} params, input {}), this run builds '{}' ({} params, input {}): "
        "model signatures differ",
        source, model_name, ck.params.size(), ck.meta.at("input_shape").as_string(), model.name(), model.num_params(),
        model.input_shape().str()));
  }
  if (ck.params.size() != model.num_params()) {
    throw CollectiveError(fmt::format("{}: params: {} floats, the model has {}", source, ck.params.size(),
                                      model.num_params()));
  }
  if (ck.buffers.size() != model.buffers().size()) {
    throw CollectiveError(fmt::format("{}: buffers: {} floats, the model has {}", source, ck.buffers.size(),
                                      model.buffers().size()));
  }
}

}  // namespace ringtrain
