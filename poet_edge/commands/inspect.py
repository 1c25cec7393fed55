"""poet inspect MODEL.onnx [--train SPEC] [--batch N] [--loss L] [--json]"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from poet_edge import autodiff, frontend, optimizer, sanity
from poet_edge.autodiff import Loss
from poet_edge.commands import add_batch
from poet_edge.inspect_model import format_inspection, inspect
from poet_edge.planning import INPUT_HELP, InputPlace
from poet_edge.trainable import TRAIN_HELP
from poet_edge.units import SIZE_HELP, parse_size


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "inspect",
        help="summarise a model's forward and training graphs and its memory floor",
        description="Print node counts, parameters (trainable / frozen), activation bytes, forward "
        "and backward MACs and the memory floor of the training graph.",
    )
    p.add_argument("model", type=Path, help="ONNX model")
    p.add_argument("--train", default="all", help=TRAIN_HELP)
    add_batch(p)
    p.add_argument("--loss", choices=[x.value for x in Loss], default=Loss.CROSS_ENTROPY.value)
    p.add_argument(
        "--reserve", default="8KB", help=f"stack/runtime reserve counted in the floor, {SIZE_HELP}"
    )
    p.add_argument(
        "--input",
        choices=[x.value for x in InputPlace],
        default=InputPlace.RAM.value,
        help=INPUT_HELP,
    )
    optimizer.add_arguments(p)
    autodiff.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    batch = frontend.batch_of(args.model, args.batch)
    model = frontend.load_onnx(args.model)
    sanity.check_onnx(model)
    sanity.check_graph(frontend.to_ir(model, batch))  # the hard cap, before any per-element work
    r = inspect(
        args.model,
        batch,
        Loss(args.loss),
        args.train,
        parse_size(args.reserve),
        InputPlace(args.input),
        optimizer.from_args(args),
        autodiff.options_from_args(args),
    )
    print(json.dumps(r.to_json(), indent=1) if args.json else format_inspection(r))
    return 0
