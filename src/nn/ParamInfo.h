// Where one parameter tensor lives in the model's flat parameter buffer.
#pragma once

#include <cstddef>
#include <string>

namespace ringtrain {

enum class ParamKind {
  kWeight,     // conv / linear weights: weight decay and LARS trust ratio apply
  kBias,       // biases: excluded from LARS, as in You et al. 2017
  kNormScale,  // BatchNorm gamma: excluded from LARS
  kNormShift,  // BatchNorm beta: excluded from LARS
};

struct ParamInfo {
  std::string name;         // e.g. "conv1.weight"
  std::size_t offset = 0;   // in floats, into Model::params() / Model::grads()
  std::size_t count = 0;    // number of floats
  ParamKind kind = ParamKind::kWeight;
  int layer = 0;            // index of the owning layer in forward order
};

}  // namespace ringtrain
