"""Writes a GGUF file with the PyPI gguf package and, beside it, the values its own dequantizer reads back.

usage: gguf_write.py OUT.gguf OUT_expected.safetensors

The file holds metadata of every value kind and one [3, 256] tensor of each type GgufFile reads. Types the gguf package
can quantize (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) are quantized from N(0, 1) values; for the K-quants, which it
only dequantizes, the blocks are random bytes with the half-precision scales set to small finite values. The expected
values are gguf.quants.dequantize's, so the test compares ours with the reference implementation bit for bit.
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType as T, GGUFWriter, quants
from safetensors.numpy import save_file

out, expected_path = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)
w = GGUFWriter(out, "llama")
w.add_uint32("test.u32", 7)
w.add_int64("test.i64", -5)
w.add_float32("test.f32", 0.5)
w.add_bool("test.bool", True)
w.add_string("test.str", "héllo")
w.add_array("test.strs", ["a", "bc", ""])
w.add_array("test.ints", [1, 2, 3])
w.add_array("test.floats", [0.25, 1.5])

expected = {}
values = rng.standard_normal((3, 256)).astype(np.float32)
w.add_tensor("f32", values)
expected["f32"] = values
for t in (T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0):
    q = quants.quantize(values, t)
    w.add_tensor(t.name.lower(), q, raw_dtype=t)
    expected[t.name.lower()] = quants.dequantize(q, t).astype(np.float32)

# K-quant blocks: (bytes per block, offsets of the half scales inside it)
k_layouts = {T.Q4_K: (144, [0, 2]), T.Q5_K: (176, [0, 2]), T.Q6_K: (210, [208])}
for t, (size, halves) in k_layouts.items():
    raw = rng.integers(0, 256, size=(3, size), dtype=np.uint8)
    for off in halves:
        raw[:, off:off + 2] = np.frombuffer(rng.uniform(0.01, 0.1, 3).astype(np.float16).tobytes(),
                                            dtype=np.uint8).reshape(3, 2)
    w.add_tensor(t.name.lower(), raw, raw_dtype=t)
    expected[t.name.lower()] = quants.dequantize(raw, t).astype(np.float32)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
save_file({k: np.ascontiguousarray(v) for k, v in expected.items()}, expected_path)
