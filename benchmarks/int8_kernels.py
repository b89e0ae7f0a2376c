"""The pinned model with its weight products on ONNX Runtime's int8 kernels, for ``model_pass.py``.

The shipped graph keeps each weight as int8 numbers and a float scale per output column, turned
into float weights by a ``Cast`` and a ``Mul`` that the runtime folds at load: every ``MatMul``
then runs on float32. Here each such ``MatMul`` is rewritten, in memory, to one of the runtime's
int8 kernels fed the same int8 numbers and scales:

* ``DynamicQuantizeMatMul``: the activations quantised to 8 bits at run time, an int8 product;
* ``MatMulNBits`` (8 bits, blocks of 32, the column's scale in each block): ``accuracy_level`` 0
  keeps the activations in float32 (the weights dequantised in the kernel), 4 quantises them.

Rewriting a graph needs the ``onnx`` package, which is no dependency of the product (nor of its
development): install it to measure these (``pip install onnx``); without it ``model_pass.py``
leaves them out and says so. Nothing is downloaded and no weights are added.
"""

from __future__ import annotations

import copy
from typing import Any

KINDS: dict[str, dict[str, Any]] = {
    "int8_dynamic_quantize_matmul": {"op": "DynamicQuantizeMatMul"},
    "int8_matmul_nbits_float_activations": {"op": "MatMulNBits", "accuracy_level": 0},
    "int8_matmul_nbits_int8_activations": {"op": "MatMulNBits", "accuracy_level": 4},
}
BLOCK = 32


def available() -> bool:
    try:
        import onnx  # noqa: F401
    except ImportError:
        return False
    return True


def rewritten(model: bytes, name: str) -> bytes:
    """``model`` with every dequantised weight's ``MatMul`` on the kernel ``KINDS[name]`` names."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    kind = KINDS[name]
    graph_model = copy.deepcopy(onnx.load_from_string(model))
    graph = graph_model.graph
    initializers = {i.name: i for i in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    dropped: set[int] = set()
    for node in list(graph.node):
        mul = producers.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = producers.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in initializers:
            continue
        weights = cast.input[0]
        q = numpy_helper.to_array(initializers[weights])
        scale = numpy_helper.to_array(initializers[mul.input[1]]).reshape(-1).astype(np.float32)
        k, n = q.shape
        if kind["op"] == "DynamicQuantizeMatMul":
            graph.initializer.extend([numpy_helper.from_array(scale, weights + "_s"),
                                      numpy_helper.from_array(np.zeros(n, np.int8), weights + "_z")])
            new = helper.make_node("DynamicQuantizeMatMul", [node.input[0], weights, weights + "_s", weights + "_z"],
                                   list(node.output), domain="com.microsoft")
        else:
            blocks = k // BLOCK
            packed = (q.astype(np.int16) + 128).astype(np.uint8).T.reshape(n, blocks, BLOCK)
            graph.initializer.extend([numpy_helper.from_array(packed, weights + "_b"),
                                      numpy_helper.from_array(np.repeat(scale, blocks), weights + "_bs"),
                                      numpy_helper.from_array(np.full(n * blocks, 128, np.uint8), weights + "_bz")])
            new = helper.make_node("MatMulNBits", [node.input[0], weights + "_b", weights + "_bs", weights + "_bz"],
                                   list(node.output), domain="com.microsoft", K=k, N=n, bits=8, block_size=BLOCK,
                                   accuracy_level=kind["accuracy_level"])
        at = list(graph.node).index(node)
        graph.node.remove(node)
        graph.node.insert(at, new)
        dropped |= {id(mul), id(cast)}
    kept = [node for node in graph.node if id(node) not in dropped]
    del graph.node[:]
    graph.node.extend(kept)
    if not any(o.domain == "com.microsoft" for o in graph_model.opset_import):
        graph_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    rewritten_model: bytes = graph_model.SerializeToString()
    return rewritten_model
