"""ONNX names reach the generated C only escaped: a name with a comment end, quotes, backslashes, a line
break, trigraphs or non-ASCII bytes neither breaks the build nor injects
code, and poet_get_param still finds it."""

from __future__ import annotations

import sys

import numpy as np
import onnx
from conftest import EXAMPLES, need_tools

from poet_edge import runner
from poet_edge.codegen.emit import c_comment, c_string
from poet_edge.compiler import CompileOptions, compile_model

sys.path.insert(0, str(EXAMPLES))
from make_mlp import make_mlp  # noqa: E402

HOSTILE = ["*/ #error injected /*", 'a"b\\c', "line\nbreak #define x", "q??=w??/", "caf\u00e9 \u2603", "/*/"]


def _hostile_mlp(path) -> dict[str, str]:
    """examples/mlp.onnx's MLP with every node, value and initializer renamed; returns old -> new names."""
    model = make_mlp()
    g = model.graph
    names = {n.name for n in g.node} | {t for n in g.node for t in n.output} | {i.name for i in g.initializer}
    names = sorted(names - {"input", "logits"})
    new = {old: f"{HOSTILE[i % len(HOSTILE)]}:{old}" for i, old in enumerate(names)}
    for n in g.node:
        n.name = new.get(n.name, n.name)
        n.input[:] = [new.get(t, t) for t in n.input]
        n.output[:] = [new.get(t, t) for t in n.output]
    for init in g.initializer:
        init.name = new[init.name]
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return new


def test_comment_and_string_escaping():
    for text in HOSTILE:
        c = c_comment(text)
        assert "*/" not in c and "/*" not in c and "??" not in c and "\n" not in c
        assert all(" " <= ch <= "~" for ch in c)
        s = c_string(text)
        body = s[1:-1]
        assert "??" not in body and "\n" not in body and all(" " <= ch <= "~" for ch in body)
    assert c_comment("???=") == "? ? ?="


def test_hostile_names_build_and_train(tmp_path):
    need_tools("gcc")
    model = tmp_path / 'evil "model" ??= \\ *.onnx'
    new = _hostile_mlp(model)
    out = tmp_path / "out"
    compile_model(CompileOptions(model, "cortex-m4", 256 * 1024, out, batch=2))
    source = (out / "poet_model.c").read_text()
    for line in source.splitlines():
        stripped = line.strip()
        assert not stripped.startswith(("#error", "#define x")), line
    result = runner.run_project(out, "host", 2)  # -Wall -Wextra -Werror: an injected #error fails the build
    assert len(result.steps) == 2 and all(np.isfinite(s.loss) for s in result.steps)
    weights = {v for k, v in new.items() if k.endswith((".weight", ".bias"))}
    assert weights and weights <= set(result.params), sorted(set(result.params) ^ weights)
