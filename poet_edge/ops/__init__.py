"""The op registry: one line per op. ``get(name)`` raises a PoetError naming what is supported."""

from __future__ import annotations

from poet_edge.errors import PoetError
from poet_edge.ops import add, flatten, gemm, matmul, mse, reduce_sum_to, relu, reshape, sgd, softmax_xent

# isort: split
from poet_edge.ops import adam, sgd_momentum  # optimizers

# isort: split
from poet_edge.ops import averagepool, batchnorm, channel_sum, clip, conv, globalaveragepool, maxpool  # CNN

# isort: split
from poet_edge.ops import (  # elementwise / transformer
    concat,
    div,
    dropout,
    erf,
    gelu,
    identity,
    layer_norm,
    mul,
    reduce_mean,
    sigmoid,
    slice,
    softmax,
    split,
    sub,
    tanh,
    transpose,
    zeros,
)

# isort: split
from poet_edge.ops import equal, expand, gather, hardsigmoid, hardswish, squeeze, unsqueeze, where  # issue 54

# isort: split
from poet_edge.ops import leaky_relu, pad, resize  # users' models (2)

# isort: split
from poet_edge.ops import gru, lstm  # recurrent

# isort: split
# training-graph rewrites (TrainingOptions, splitting)
from poet_edge.ops import conv_part, fused, gemm_part, mask

# isort: split
from poet_edge.ops.base import OpDef

REGISTRY: dict[str, OpDef] = {
    op.name: op
    for op in (
        add.OP,
        flatten.OP,
        gemm.OP,
        matmul.OP,
        relu.OP,
        reshape.OP,
        # internal ops of training graphs
        relu.GRAD,
        reduce_sum_to.OP,
        softmax_xent.OP,
        softmax_xent.GRAD,
        mse.OP,
        mse.GRAD,
        sgd.OP,
        sgd_momentum.OP,
        adam.OP,
        # CNN
        conv.OP,
        batchnorm.OP,
        clip.OP,
        maxpool.OP,
        averagepool.OP,
        globalaveragepool.OP,
        conv.GRAD_INPUT,
        conv.GRAD_WEIGHT,
        channel_sum.OP,
        batchnorm.GRAD_INPUT,
        batchnorm.GRAD_SCALE,
        clip.GRAD,
        maxpool.GRAD,
        averagepool.GRAD,
        globalaveragepool.GRAD,
        # elementwise / transformer
        sub.OP,
        mul.OP,
        div.OP,
        sigmoid.OP,
        tanh.OP,
        erf.OP,
        gelu.OP,
        softmax.OP,
        layer_norm.OP,
        transpose.OP,
        split.OP,
        slice.OP,
        concat.OP,
        reduce_mean.OP,
        identity.OP,
        dropout.OP,
        sigmoid.GRAD,
        tanh.GRAD,
        erf.GRAD,
        gelu.GRAD,
        softmax.GRAD,
        layer_norm.GRAD,
        layer_norm.SCALE_GRAD,
        slice.GRAD,
        reduce_mean.BROADCAST_TO,
        zeros.OP,
        # models users bring (issue 54)
        hardsigmoid.OP,
        hardswish.OP,
        expand.OP,
        gather.OP,
        squeeze.OP,
        unsqueeze.OP,
        equal.OP,
        where.OP,
        hardsigmoid.GRAD,
        hardswish.GRAD,
        gather.GRAD,
        where.GRAD,
        # models users bring (2)
        leaky_relu.OP,
        pad.OP,
        resize.OP,
        resize.UPSAMPLE,
        leaky_relu.GRAD,
        pad.GRAD,
        resize.GRAD,
        # recurrent
        gru.OP,
        gru.GRAD,
        lstm.OP,
        lstm.STATES,
        lstm.GRAD,
        # training-graph rewrites
        fused.CONV,
        fused.GEMM,
        mask.MASK,
        mask.GRAD,
        conv_part.OP,
        conv_part.GRAD_INPUT,
        gemm_part.OP,
    )
}


def supported_onnx_ops() -> list[str]:
    return sorted(name for name, op in REGISTRY.items() if not op.internal)


def get(name: str) -> OpDef:
    try:
        return REGISTRY[name]
    except KeyError:
        raise PoetError(f"unsupported op {name}; supported: {', '.join(supported_onnx_ops())}") from None
