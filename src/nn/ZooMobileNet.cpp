// MobileNetV2's inverted residual blocks as graph nodes.
#include "nn/ZooMobileNet.h"

#include <string>

#include "nn/ZooResNet.h"

namespace ringtrain {
namespace {

// Expand by t (skipped at t = 1), depthwise 3x3 at stride, project to out without an
// activation; the block's input is added back when stride 1 keeps the shape.
void inverted_residual(ZooBuilder& b, int t, int out, int stride) {
  const std::string in = b.current();
  const int channels = static_cast<int>(b.dims()[1]);
  const int hidden = channels * t;
  if (t != 1) b.conv(hidden, 1, 1, 0, false).bn().relu6();
  b.grouped_conv(hidden, 3, stride, 1, hidden, false).bn().relu6();
  b.conv(out, 1, 1, 0, false).bn();
  if (stride == 1 && channels == out) b.add({in, b.current()});
}

}  // namespace

void build_mobilenet_v2(ZooBuilder& b, int classes) {
  check_min_side(b, kTorchvisionMinSide, "a torchvision-shaped MobileNetV2");
  // torchvision's inverted_residual_setting: expansion t, channels c, repeats n, first stride s.
  struct Stage {
    int t, c, n, s;
  };
  b.conv(32, 3, 2, 1, false).bn().relu6();
  for (const Stage st : {Stage{1, 16, 1, 1}, Stage{6, 24, 2, 2}, Stage{6, 32, 3, 2}, Stage{6, 64, 4, 2},
                         Stage{6, 96, 3, 1}, Stage{6, 160, 3, 2}, Stage{6, 320, 1, 1}})
    for (int i = 0; i < st.n; ++i) inverted_residual(b, st.t, st.c, i == 0 ? st.s : 1);
  b.conv(1280, 1, 1, 0, false).bn().relu6();
  b.global_avgpool().flatten().dropout(0.2f).linear(classes);
}

}  // namespace ringtrain
