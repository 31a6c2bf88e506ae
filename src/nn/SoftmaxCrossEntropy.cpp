// Softmax cross-entropy: loss_i = log(sum_j exp(z_ij - m_i)) - (z_iy - m_i), m_i = max_j z_ij.
#include "nn/SoftmaxCrossEntropy.h"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace ringtrain {

LossResult SoftmaxCrossEntropy::forward(const float* logits, const std::int32_t* labels, int n, int classes) {
  if (n <= 0 || classes <= 0) throw std::invalid_argument("SoftmaxCrossEntropy: empty batch or no classes");
  n_ = n;
  classes_ = classes;
  prob_.resize(static_cast<std::size_t>(n) * classes);
  labels_.assign(labels, labels + n);
  LossResult r;
  r.count = n;
  for (int i = 0; i < n; ++i) {
    const int y = labels[i];
    if (y < 0 || y >= classes)
      throw std::invalid_argument(
          fmt::format("SoftmaxCrossEntropy: label {} of sample {} not in [0, {})", y, i, classes));
    const float* z = logits + static_cast<std::size_t>(i) * classes;
    float* p = prob_.data() + static_cast<std::size_t>(i) * classes;
    int arg_max = 0;
    for (int j = 1; j < classes; ++j)
      if (z[j] > z[arg_max]) arg_max = j;
    const double m = z[arg_max];
    double sum = 0.0;
    for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(z[j]) - m);
    const double log_sum = std::log(sum);
    for (int j = 0; j < classes; ++j) p[j] = static_cast<float>(std::exp(static_cast<double>(z[j]) - m - log_sum));
    r.loss_sum += log_sum - (static_cast<double>(z[y]) - m);
    r.correct += arg_max == y ? 1 : 0;
  }
  return r;
}

void SoftmaxCrossEntropy::backward(float* diff_logits) const {
  const float inv_n = 1.0f / static_cast<float>(n_);
  for (int i = 0; i < n_; ++i) {
    const float* p = prob_.data() + static_cast<std::size_t>(i) * classes_;
    float* d = diff_logits + static_cast<std::size_t>(i) * classes_;
    for (int j = 0; j < classes_; ++j) d[j] = p[j] * inv_n;
    d[labels_[i]] -= inv_n;
  }
}

}  // namespace ringtrain
