// SoftmaxCrossEntropy: the loss on plain (N, classes) logits, numerically stable
// (log-sum-exp with the row maximum subtracted), gradient of the batch mean.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/Model.h"

namespace ringtrain {

class SoftmaxCrossEntropy {
 public:
  // logits: (n, classes) row-major; labels: n values in [0, classes), else
  // std::invalid_argument. Returns the loss sum, the arg-max hits and n; keeps the
  // probabilities for backward.
  LossResult forward(const float* logits, const std::int32_t* labels, int n, int classes);

  // diff_logits (n, classes) = (softmax(logits) - onehot(label)) / n: the gradient of the
  // mean loss over the batch of the last forward.
  void backward(float* diff_logits) const;

 private:
  std::vector<float> prob_;  // (n, classes)
  std::vector<std::int32_t> labels_;
  int n_ = 0, classes_ = 0;
};

}  // namespace ringtrain
