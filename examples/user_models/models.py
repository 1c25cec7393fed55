"""The PyTorch models of the "models users bring" table (issue 54): torchvision's own definitions
(random init, no weights download) and four small models written here.

torchvision's C++ ops (nms, roi_align, ...) may not load against a CPU-only torch of another build;
the model definitions are pure Python, so `torchvision_module` imports a model file without running
torchvision/__init__.py (which registers those ops)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

import torch
from torch import nn


def torchvision_module(name: str) -> types.ModuleType:
    """torchvision.models.<name>, imported without torchvision's C extension."""
    try:
        return importlib.import_module(f"torchvision.models.{name}")
    except (RuntimeError, OSError, ImportError):
        pass
    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]  # a half-imported torchvision: start again without its __init__
    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torchvision is not installed")
    root = list(spec.submodule_search_locations)[0]
    for pkg, path in (("torchvision", root), ("torchvision.models", f"{root}/models")):
        stub = types.ModuleType(pkg)
        stub.__path__ = [path]
        sys.modules[pkg] = stub
    return importlib.import_module(f"torchvision.models.{name}")


class GRUKWS(nn.Module):
    """Keyword spotter on MFCC frames (batch x 49 frames x 10 coefficients): one nn.GRU layer with
    64 hidden units, the last hidden state, a dense layer to 12 keywords."""

    def __init__(self, frames: int = 49, coeffs: int = 10, hidden: int = 64, classes: int = 12) -> None:
        super().__init__()
        self.gru = nn.GRU(coeffs, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.fc(h[-1])


class GRUCellKWS(nn.Module):
    """The same keyword spotter with the recurrence unrolled in Python over an nn.GRUCell (a zero
    initial state, 49 cell calls), as users write it for streaming inference."""

    def __init__(self, frames: int = 49, coeffs: int = 10, hidden: int = 64, classes: int = 12) -> None:
        super().__init__()
        self.frames, self.hidden = frames, hidden
        self.cell = nn.GRUCell(coeffs, hidden)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[0], self.hidden, dtype=x.dtype)
        for t in range(self.frames):
            h = self.cell(x[:, t, :], h)
        return self.fc(h)


class Attention(nn.Module):
    """timm's ViT attention: one qkv projection, scaled dot product, softmax, output projection."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.scale = self.head_dim**-0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(x)


class Block(nn.Module):
    """timm's pre-norm transformer block: x + attn(LN(x)), x + MLP(LN(x)) with a GELU MLP."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, dim * mlp_ratio)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(dim * mlp_ratio, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class TinyViT(nn.Module):
    """A timm-style tiny ViT on 3x32x32: 8x8 patch embedding conv to 64 channels (16 patches), a class
    token and learned position embedding, 2 pre-norm blocks with 2 heads, final LayerNorm, the class
    token's features to a dense layer with 10 classes."""

    def __init__(self, img: int = 32, patch: int = 8, dim: int = 64, depth: int = 2, heads: int = 2) -> None:
        super().__init__()
        n = (img // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


class AccelCNN1d(nn.Module):
    """Human-activity recognition on 3-axis accelerometer windows of 128 samples: 3 x [Conv1d k5 p2,
    ReLU, MaxPool1d 2] with 3->16->32->64 channels, flatten (64 x 16), a dense layer to 6 classes."""

    def __init__(self, length: int = 128, classes: int = 6) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for cin, cout in ((3, 16), (16, 32), (32, 64)):
            layers += [nn.Conv1d(cin, cout, 5, padding=2), nn.ReLU(), nn.MaxPool1d(2)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(64 * (length // 8), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


class M5(nn.Module):
    """Keyword spotting on raw audio (8 kHz, 1 s: 8,000 samples), the M5 network of Dai et al., "Very deep
    convolutional neural networks for raw waveforms" (ICASSP 2017), sized as in torchaudio's speech-command
    tutorial: Conv1d 1->32 k80 stride 16, BatchNorm, ReLU, MaxPool1d 4, then 3 x [Conv1d k3 (32, 64, 64
    channels), BatchNorm, ReLU, MaxPool1d 4], average over time, a dense layer to 35 classes. Its first map,
    32 x 496 floats, is 62 KB, 2 KB per channel."""

    def __init__(self, n_input: int = 1, classes: int = 35, stride: int = 16, n_channel: int = 32) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        widths = ((n_input, n_channel, 80, stride), (n_channel, n_channel, 3, 1))
        widths += ((n_channel, 2 * n_channel, 3, 1), (2 * n_channel, 2 * n_channel, 3, 1))
        for cin, cout, k, s in widths:
            layers += [nn.Conv1d(cin, cout, k, stride=s), nn.BatchNorm1d(cout), nn.ReLU(), nn.MaxPool1d(4)]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(2 * n_channel, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(x.mean(dim=-1))


class TinyUpNet(nn.Module):
    """An encoder-decoder with the ops of YOLOv3-tiny's darknet layers, on 32x32 RGB: 2 x [Conv2d k3 p1,
    LeakyReLU(0.1), MaxPool2d 2] (3->8->16 channels), nearest Upsample x2, ZeroPad2d right and bottom by 1
    and a 2x2 conv (darknet's size-2 stride-1 layers pad this way), LeakyReLU(0.1), average pooling, a dense
    layer to 10 classes."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        act = nn.LeakyReLU(0.1)
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            act,
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            act,
            nn.MaxPool2d(2),
        )
        self.decoder = nn.Sequential(
            nn.Upsample(scale_factor=2, mode="nearest"), nn.ZeroPad2d((0, 1, 0, 1)), nn.Conv2d(16, 16, 2), act
        )
        self.fc = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.decoder(self.encoder(x)).mean(dim=(2, 3)))
