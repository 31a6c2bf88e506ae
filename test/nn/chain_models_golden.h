// What main (commit 0999d0f, models as layer sequences) printed for the sequential zoo models:
// signature(), then each param_infos() entry (name offset count layer), then the buffer
// count. Models as graphs must reproduce it exactly (graph_golden_test.cpp).
#pragma once

namespace ringtrain::test {

inline constexpr const char* kChainModelsBefore = R"(=== logreg
model logreg input 1x28x28 classes 10 params 7850
0 flatten1 flatten 1x28x28 -> 784
1 fc1 linear(in=784,out=10,bias=1) 784 -> 10
fc1.weight 0 7840 1
fc1.bias 7840 10 1
buffers 0
=== mlp
model mlp input 3x32x32 classes 10 params 3846442
0 flatten1 flatten 3x32x32 -> 3072
1 fc1 linear(in=3072,out=1024,bias=1) 3072 -> 1024
2 relu1 relu 1024 -> 1024
3 fc2 linear(in=1024,out=512,bias=1) 1024 -> 512
4 relu2 relu 512 -> 512
5 fc3 linear(in=512,out=256,bias=1) 512 -> 256
6 relu3 relu 256 -> 256
7 fc4 linear(in=256,out=128,bias=1) 256 -> 128
8 relu4 relu 128 -> 128
9 fc5 linear(in=128,out=64,bias=1) 128 -> 64
10 relu5 relu 64 -> 64
11 fc6 linear(in=64,out=32,bias=1) 64 -> 32
12 relu6 relu 32 -> 32
13 fc7 linear(in=32,out=10,bias=1) 32 -> 10
fc7.weight 0 320 13
fc7.bias 320 10 13
fc6.weight 330 2048 11
fc6.bias 2378 32 11
fc5.weight 2410 8192 9
fc5.bias 10602 64 9
fc4.weight 10666 32768 7
fc4.bias 43434 128 7
fc3.weight 43562 131072 5
fc3.bias 174634 256 5
fc2.weight 174890 524288 3
fc2.bias 699178 512 3
fc1.weight 699690 3145728 1
fc1.bias 3845418 1024 1
buffers 0
=== lenet5
model lenet5 input 1x28x28 classes 10 params 61706
0 conv1 conv2d(in=1,out=6,k=5,s=1,p=2,bias=1) 1x28x28 -> 6x28x28
1 relu1 relu 6x28x28 -> 6x28x28
2 maxpool1 maxpool2d(k=2,s=2,p=0) 6x28x28 -> 6x14x14
3 conv2 conv2d(in=6,out=16,k=5,s=1,p=0,bias=1) 6x14x14 -> 16x10x10
4 relu2 relu 16x10x10 -> 16x10x10
5 maxpool2 maxpool2d(k=2,s=2,p=0) 16x10x10 -> 16x5x5
6 flatten1 flatten 16x5x5 -> 400
7 fc1 linear(in=400,out=120,bias=1) 400 -> 120
8 relu3 relu 120 -> 120
9 fc2 linear(in=120,out=84,bias=1) 120 -> 84
10 relu4 relu 84 -> 84
11 fc3 linear(in=84,out=10,bias=1) 84 -> 10
fc3.weight 0 840 11
fc3.bias 840 10 11
fc2.weight 850 10080 9
fc2.bias 10930 84 9
fc1.weight 11014 48000 7
fc1.bias 59014 120 7
conv2.weight 59134 2400 3
conv2.bias 61534 16 3
conv1.weight 61550 150 0
conv1.bias 61700 6 0
buffers 0
=== svhn-cnn
model svhn-cnn input 3x32x32 classes 10 params 40450
0 conv1 conv2d(in=3,out=6,k=5,s=1,p=1,bias=1) 3x32x32 -> 6x30x30
1 relu1 relu 6x30x30 -> 6x30x30
2 maxpool1 maxpool2d(k=2,s=2,p=0) 6x30x30 -> 6x15x15
3 conv2 conv2d(in=6,out=16,k=5,s=1,p=1,bias=1) 6x15x15 -> 16x13x13
4 relu2 relu 16x13x13 -> 16x13x13
5 maxpool2 maxpool2d(k=2,s=2,p=0) 16x13x13 -> 16x6x6
6 flatten1 flatten 16x6x6 -> 576
7 fc1 linear(in=576,out=64,bias=1) 576 -> 64
8 relu3 relu 64 -> 64
9 fc2 linear(in=64,out=10,bias=1) 64 -> 10
fc2.weight 0 640 9
fc2.bias 640 10 9
fc1.weight 650 36864 7
fc1.bias 37514 64 7
conv2.weight 37578 2400 3
conv2.bias 39978 16 3
conv1.weight 39994 450 0
conv1.bias 40444 6 0
buffers 0
=== alexnet
model alexnet input 3x32x32 classes 10 params 7706442
0 conv1 conv2d(in=3,out=64,k=5,s=1,p=2,bias=1) 3x32x32 -> 64x32x32
1 relu1 relu 64x32x32 -> 64x32x32
2 lrn1 lrn(size=5,alpha=0.0001,beta=0.75,k=2) 64x32x32 -> 64x32x32
3 maxpool1 maxpool2d(k=2,s=2,p=0) 64x32x32 -> 64x16x16
4 conv2 conv2d(in=64,out=192,k=5,s=1,p=2,bias=1) 64x16x16 -> 192x16x16
5 relu2 relu 192x16x16 -> 192x16x16
6 lrn2 lrn(size=5,alpha=0.0001,beta=0.75,k=2) 192x16x16 -> 192x16x16
7 maxpool2 maxpool2d(k=2,s=2,p=0) 192x16x16 -> 192x8x8
8 conv3 conv2d(in=192,out=384,k=3,s=1,p=1,bias=1) 192x8x8 -> 384x8x8
9 relu3 relu 384x8x8 -> 384x8x8
10 conv4 conv2d(in=384,out=256,k=3,s=1,p=1,bias=1) 384x8x8 -> 256x8x8
11 relu4 relu 256x8x8 -> 256x8x8
12 conv5 conv2d(in=256,out=256,k=3,s=1,p=1,bias=1) 256x8x8 -> 256x8x8
13 relu5 relu 256x8x8 -> 256x8x8
14 maxpool3 maxpool2d(k=2,s=2,p=0) 256x8x8 -> 256x4x4
15 flatten1 flatten 256x4x4 -> 4096
16 dropout1 dropout(p=0.5) 4096 -> 4096
17 fc1 linear(in=4096,out=1024,bias=1) 4096 -> 1024
18 relu6 relu 1024 -> 1024
19 dropout2 dropout(p=0.5) 1024 -> 1024
20 fc2 linear(in=1024,out=1024,bias=1) 1024 -> 1024
21 relu7 relu 1024 -> 1024
22 fc3 linear(in=1024,out=10,bias=1) 1024 -> 10
fc3.weight 0 10240 22
fc3.bias 10240 10 22
fc2.weight 10250 1048576 20
fc2.bias 1058826 1024 20
fc1.weight 1059850 4194304 17
fc1.bias 5254154 1024 17
conv5.weight 5255178 589824 12
conv5.bias 5845002 256 12
conv4.weight 5845258 884736 10
conv4.bias 6729994 256 10
conv3.weight 6730250 663552 8
conv3.bias 7393802 384 8
conv2.weight 7394186 307200 4
conv2.bias 7701386 192 4
conv1.weight 7701578 4800 0
conv1.bias 7706378 64 0
buffers 0
=== vgg11
model vgg11 input 3x32x32 classes 10 params 9231114
0 conv1 conv2d(in=3,out=64,k=3,s=1,p=1,bias=1) 3x32x32 -> 64x32x32
1 bn1 batchnorm2d(c=64,eps=1e-05,momentum=0.1) 64x32x32 -> 64x32x32
2 relu1 relu 64x32x32 -> 64x32x32
3 maxpool1 maxpool2d(k=2,s=2,p=0) 64x32x32 -> 64x16x16
4 conv2 conv2d(in=64,out=128,k=3,s=1,p=1,bias=1) 64x16x16 -> 128x16x16
5 bn2 batchnorm2d(c=128,eps=1e-05,momentum=0.1) 128x16x16 -> 128x16x16
6 relu2 relu 128x16x16 -> 128x16x16
7 maxpool2 maxpool2d(k=2,s=2,p=0) 128x16x16 -> 128x8x8
8 conv3 conv2d(in=128,out=256,k=3,s=1,p=1,bias=1) 128x8x8 -> 256x8x8
9 bn3 batchnorm2d(c=256,eps=1e-05,momentum=0.1) 256x8x8 -> 256x8x8
10 relu3 relu 256x8x8 -> 256x8x8
11 conv4 conv2d(in=256,out=256,k=3,s=1,p=1,bias=1) 256x8x8 -> 256x8x8
12 bn4 batchnorm2d(c=256,eps=1e-05,momentum=0.1) 256x8x8 -> 256x8x8
13 relu4 relu 256x8x8 -> 256x8x8
14 maxpool3 maxpool2d(k=2,s=2,p=0) 256x8x8 -> 256x4x4
15 conv5 conv2d(in=256,out=512,k=3,s=1,p=1,bias=1) 256x4x4 -> 512x4x4
16 bn5 batchnorm2d(c=512,eps=1e-05,momentum=0.1) 512x4x4 -> 512x4x4
17 relu5 relu 512x4x4 -> 512x4x4
18 conv6 conv2d(in=512,out=512,k=3,s=1,p=1,bias=1) 512x4x4 -> 512x4x4
19 bn6 batchnorm2d(c=512,eps=1e-05,momentum=0.1) 512x4x4 -> 512x4x4
20 relu6 relu 512x4x4 -> 512x4x4
21 maxpool4 maxpool2d(k=2,s=2,p=0) 512x4x4 -> 512x2x2
22 conv7 conv2d(in=512,out=512,k=3,s=1,p=1,bias=1) 512x2x2 -> 512x2x2
23 bn7 batchnorm2d(c=512,eps=1e-05,momentum=0.1) 512x2x2 -> 512x2x2
24 relu7 relu 512x2x2 -> 512x2x2
25 conv8 conv2d(in=512,out=512,k=3,s=1,p=1,bias=1) 512x2x2 -> 512x2x2
26 bn8 batchnorm2d(c=512,eps=1e-05,momentum=0.1) 512x2x2 -> 512x2x2
27 relu8 relu 512x2x2 -> 512x2x2
28 maxpool5 maxpool2d(k=2,s=2,p=0) 512x2x2 -> 512x1x1
29 flatten1 flatten 512x1x1 -> 512
30 fc1 linear(in=512,out=10,bias=1) 512 -> 10
fc1.weight 0 5120 30
fc1.bias 5120 10 30
bn8.weight 5130 512 26
bn8.bias 5642 512 26
conv8.weight 6154 2359296 25
conv8.bias 2365450 512 25
bn7.weight 2365962 512 23
bn7.bias 2366474 512 23
conv7.weight 2366986 2359296 22
conv7.bias 4726282 512 22
bn6.weight 4726794 512 19
bn6.bias 4727306 512 19
conv6.weight 4727818 2359296 18
conv6.bias 7087114 512 18
bn5.weight 7087626 512 16
bn5.bias 7088138 512 16
conv5.weight 7088650 1179648 15
conv5.bias 8268298 512 15
bn4.weight 8268810 256 12
bn4.bias 8269066 256 12
conv4.weight 8269322 589824 11
conv4.bias 8859146 256 11
bn3.weight 8859402 256 9
bn3.bias 8859658 256 9
conv3.weight 8859914 294912 8
conv3.bias 9154826 256 8
bn2.weight 9155082 128 5
bn2.bias 9155210 128 5
conv2.weight 9155338 73728 4
conv2.bias 9229066 128 4
bn1.weight 9229194 64 1
bn1.bias 9229258 64 1
conv1.weight 9229322 1728 0
conv1.bias 9231050 64 0
buffers 5504
)";

}  // namespace ringtrain::test
