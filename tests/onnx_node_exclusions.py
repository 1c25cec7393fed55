"""ONNX backend node-test cases we do not run, each with its reason (one section per op family).

General rules applied in test_onnx_node.py without listing: cases whose data inputs are not float32
(poet-edge trains float32 models), cases with more than one node (function-expanded variants are covered by
their single-node originals), and cases whose attributes our op's `check` refuses with a PoetError
(counted and asserted to be refusals, never silently wrong)."""

EXCLUDED: dict[str, str] = {
    # --- skeleton ops ---
    # --- CNN ops ---
    # --- elementwise / transformer ops ---
}
