"""PyTorch peers of ringtrain's graph models: torchvision 0.14's resnet18, resnet50 and mobilenet_v2
as they are (10 classes), and He et al. 2015's CIFAR resnet20 written here as ringtrain builds it
(3x3 stem of 16 channels, three stages of three basic blocks, projection shortcuts of a 1x1
convolution and batch norm where the shape changes, ReLU after each residual sum)."""

# Input shape (C, H, W) of each graph model in the comparisons: the sizes of the targets.
GRAPH_SHAPE = {"resnet20": (3, 32, 32), "resnet18": (3, 224, 224), "resnet50": (3, 224, 224),
               "mobilenetv2": (3, 224, 224)}
TORCHVISION = {"resnet18": "resnet18", "resnet50": "resnet50", "mobilenetv2": "mobilenet_v2"}


def cifar_resnet(depth, channels, classes):
    import torch.nn as nn

    def conv_bn(c_in, c_out, k, stride):
        return [nn.Conv2d(c_in, c_out, k, stride, k // 2, bias=False), nn.BatchNorm2d(c_out)]

    class Block(nn.Module):
        def __init__(self, c_in, c_out, stride):
            super().__init__()
            self.main = nn.Sequential(*conv_bn(c_in, c_out, 3, stride), nn.ReLU(inplace=True),
                                      *conv_bn(c_out, c_out, 3, 1))
            same = stride == 1 and c_in == c_out
            self.skip = nn.Identity() if same else nn.Sequential(*conv_bn(c_in, c_out, 1, stride))

        def forward(self, x):
            return (self.main(x) + self.skip(x)).relu()

    n, layers, c = (depth - 2) // 6, [*conv_bn(channels, 16, 3, 1), nn.ReLU(inplace=True)], 16
    for planes in (16, 32, 64):
        for i in range(n):
            layers.append(Block(c, planes, 2 if i == 0 and planes != 16 else 1))
            c = planes
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))


def build(name, shape, classes=10):
    """The torch model of graph model `name` for inputs of shape (C, H, W)."""
    if name == "resnet20":
        return cifar_resnet(20, shape[0], classes)
    if shape[0] != 3:
        raise ValueError(f"{name}: torchvision's model takes 3 input channels, not {shape[0]}")
    import torchvision.models as models
    return getattr(models, TORCHVISION[name])(num_classes=classes)


def describe(name, shape):
    """Parameters and training FLOPs per image (3x the forward's 2 per multiply-add of convolutions
    and linear layers: forward, weight gradient and input gradient; the first layer's input
    gradient, which neither framework computes, is included), counted on the torch model; None
    where torch or torchvision is missing."""
    try:
        import torch
        import torch.nn as nn
        model = build(name, shape)
    except ImportError:
        return {"params": None, "train_flops_per_image": None}
    macs = []

    def count(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            k = module.kernel_size[0] * module.kernel_size[1] * module.in_channels // module.groups
            macs.append(output.numel() * k)
        else:
            macs.append(output.numel() * module.in_features)

    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            m.register_forward_hook(count)
    model.eval()
    with torch.no_grad():
        model(torch.zeros((1, *shape)))
    return {"params": sum(p.numel() for p in model.parameters()), "train_flops_per_image": 6 * sum(macs)}
