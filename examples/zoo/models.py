"""PyTorch definitions of the poet-edge model zoo (used only by export.py).

Every model returns logits (no final softmax): the training graph adds its own loss.
All models are built in float32 and exported in eval mode (dropout removed, BatchNorm using
running statistics).
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


def conv_bn_relu(cin, cout, k, stride=1, padding=None, groups=1, relu6=False, act=True, bias=True):
    """Conv -> BatchNorm -> ReLU/ReLU6. `bias=True` mirrors Keras' Conv2D default used by the MLPerf
    Tiny references (the bias is redundant before BN; the exporter folds BN into the conv anyway).
    PyTorch's symmetric padding k//2 replaces TF "same" padding: same output sizes, but TF pads
    stride-2 convs only at the bottom/right."""
    if padding is None:
        padding = k // 2 if isinstance(k, int) else tuple(x // 2 for x in k)
    layers = [
        nn.Conv2d(cin, cout, k, stride=stride, padding=padding, groups=groups, bias=bias),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6() if relu6 else nn.ReLU())
    return nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# 1. ResNet-8 (MLPerf Tiny image classification, CIFAR-10): eembc/tinyMLPerf resnet_v1_eembc
# ---------------------------------------------------------------------------------------------
class ResBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn_relu(cin, cout, 3, stride=stride)
        self.conv2 = conv_bn_relu(cout, cout, 3, act=False)
        # The reference uses a plain 1x1 conv (with bias, no BN) on the shortcut when downsampling.
        self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = self.conv2(self.conv1(x))
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(y + s)


class ResNet8(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = conv_bn_relu(3, 16, 3)
        self.stage1 = ResBlock(16, 16, 1)
        self.stage2 = ResBlock(16, 32, 2)
        self.stage3 = ResBlock(32, 64, 2)
        self.pool = nn.AvgPool2d(8)  # 8x8 -> 1x1, as AveragePooling2D(pool_size=8) in the reference
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.stage3(self.stage2(self.stage1(self.stem(x))))
        x = torch.flatten(self.pool(x), 1)
        return self.fc(x)


# ---------------------------------------------------------------------------------------------
# 2. DS-CNN small (MLPerf Tiny keyword spotting), input NCHW 1x1x49x10 (49 frames x 10 MFCC)
# ---------------------------------------------------------------------------------------------
class DSCNN(nn.Module):
    def __init__(self, num_classes=12, width=64, blocks=4):
        super().__init__()
        # Reference: Conv2D(64, (10,4), strides=2, padding="same") -> 25x5. TF "same" pads 4/5 rows
        # and 1/1 columns; we pad 5/5 rows and 1/1 columns symmetrically (same 25x5 output, no Pad op).
        self.stem = conv_bn_relu(1, width, (10, 4), stride=2, padding=(5, 1))
        ds = []
        for _ in range(blocks):
            ds.append(conv_bn_relu(width, width, 3, groups=width))  # depthwise 3x3
            ds.append(conv_bn_relu(width, width, 1))  # pointwise
        self.blocks = nn.Sequential(*ds)
        self.pool = nn.AvgPool2d((25, 5))  # AveragePooling2D(pool_size=(25,5)) in the reference
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x):
        x = self.pool(self.blocks(self.stem(x)))
        return self.fc(torch.flatten(x, 1))


# ---------------------------------------------------------------------------------------------
# 3. MobileNetV1 alpha=0.25, 96x96 (MLPerf Tiny visual wake words), 2 classes
# ---------------------------------------------------------------------------------------------
class MobileNetV1(nn.Module):
    # (pointwise output channels at alpha=1, depthwise stride)
    CFG = [
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    ]

    def __init__(self, alpha=0.25, num_classes=2):
        super().__init__()
        c = int(32 * alpha)
        layers = [conv_bn_relu(3, c, 3, stride=2)]
        for cout, s in self.CFG:
            cout = int(cout * alpha)
            layers.append(conv_bn_relu(c, c, 3, stride=s, groups=c))  # depthwise
            layers.append(conv_bn_relu(c, cout, 1))  # pointwise
            c = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)  # 96/32 = 3 -> 1x1
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.fc(torch.flatten(x, 1))


# ---------------------------------------------------------------------------------------------
# 4. FC autoencoder (MLPerf Tiny anomaly detection, ToyADMOS), 640 -> 8 -> 640
# ---------------------------------------------------------------------------------------------
class AutoEncoder(nn.Module):
    DIMS = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]

    def __init__(self):
        super().__init__()
        layers = []
        for a, b in zip(self.DIMS[:-1], self.DIMS[1:], strict=False):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(self.DIMS[-1], self.DIMS[0]))  # linear output layer
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


# ---------------------------------------------------------------------------------------------
# 5. MobileNetV2 alpha=0.35, 96x96, 2 classes (ReLU6)
# ---------------------------------------------------------------------------------------------
def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = []
        if expand != 1:
            layers.append(conv_bn_relu(cin, hidden, 1, relu6=True, bias=False))
        layers.append(conv_bn_relu(hidden, hidden, 3, stride=stride, groups=hidden, relu6=True, bias=False))
        layers.append(conv_bn_relu(hidden, cout, 1, act=False, bias=False))  # linear bottleneck
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    # (expansion t, channels c, repeats n, first stride s), as in the paper / Keras / torchvision
    CFG = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ]

    def __init__(self, alpha=0.35, num_classes=2, last_channel=1280):
        super().__init__()
        c = make_divisible(32 * alpha)
        layers = [conv_bn_relu(3, c, 3, stride=2, relu6=True, bias=False)]  # Keras: use_bias=False
        for t, ch, n, s in self.CFG:
            cout = make_divisible(ch * alpha)
            for i in range(n):
                layers.append(InvertedResidual(c, cout, s if i == 0 else 1, t))
                c = cout
        # Keras and torchvision keep 1280 channels in the last conv for alpha <= 1.
        layers.append(conv_bn_relu(c, last_channel, 1, relu6=True, bias=False))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(3)  # 96/32 = 3 -> 1x1
        self.fc = nn.Linear(last_channel, num_classes)

    def forward(self, x):
        x = self.pool(self.features(x))
        return self.fc(torch.flatten(x, 1))


# ---------------------------------------------------------------------------------------------
# 6. LeNet-5 on 1x28x28 (MNIST-style), 10 classes
# ---------------------------------------------------------------------------------------------
class LeNet5(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)  # 28x28 -> 28x28 (as LeCun's 32x32 input)
        self.conv2 = nn.Conv2d(6, 16, 5)  # 14x14 -> 10x10
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        # Deliberately the classic `view(size(0), -1)` idiom: it exports a
        # Shape -> Gather -> Unsqueeze -> Concat -> Reshape subgraph the frontend must fold.
        x = x.view(x.size(0), -1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


# ---------------------------------------------------------------------------------------------
# 7. Tiny BERT-style encoder on pre-embedded input [batch, 32, 64]
# ---------------------------------------------------------------------------------------------
class SelfAttention(nn.Module):
    def __init__(self, seq, hidden, heads):
        super().__init__()
        self.seq, self.hidden, self.heads, self.dh = seq, hidden, heads, hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)

    def split(self, t):  # [B,S,H] -> [B,heads,S,dh]; -1 for batch keeps the Reshape shape constant
        return t.reshape(-1, self.seq, self.heads, self.dh).transpose(1, 2)

    def forward(self, x):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(self.dh))
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)  # [B,heads,S,dh]
        ctx = ctx.transpose(1, 2).reshape(-1, self.seq, self.hidden)
        return self.o(ctx)


class EncoderLayer(nn.Module):  # post-LN, as in BERT
    def __init__(self, seq, hidden, heads, ffn):
        super().__init__()
        self.attn = SelfAttention(seq, hidden, heads)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, ffn)
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class BertTiny(nn.Module):
    def __init__(self, seq=32, hidden=64, heads=2, ffn=128, layers=2, num_classes=2):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, seq, hidden) * 0.02)  # learned positional embedding
        self.ln_emb = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(seq, hidden, heads, ffn) for _ in range(layers))
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):  # x: [B, seq, hidden], already embedded
        x = self.ln_emb(x + self.pos)
        for layer in self.layers:
            x = layer(x)
        return self.fc(x.mean(dim=1))  # classification head on the mean over the sequence


# ---------------------------------------------------------------------------------------------
# 8. GRU keyword spotter on MFCC frames [batch, 49, 10] (49 frames x 10 MFCC, as DS-CNN), 12 classes
# ---------------------------------------------------------------------------------------------
class GRUKWS(nn.Module):
    def __init__(self, n_mfcc=10, hidden=64, num_classes=12):
        super().__init__()
        self.hidden = hidden
        self.gru = nn.GRU(n_mfcc, hidden, batch_first=True)  # one layer, forward, zero initial state
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        _, h = self.gru(x)  # h: [1, batch, hidden], the last step's hidden state
        # reshape rather than h[0] / y[:, -1]: those export a Gather / Squeeze on run-time data
        return self.fc(h.reshape(-1, self.hidden))
