"""Writes MDS shards with MosaicML Streaming's own MDSWriter, for tests/data/streaming_test.cpp.

  mds_write.py fashion OUT IMAGES_GZ LABELS_GZ N   the first N Fashion-MNIST images ('pil', mode L) and labels
                                                   ('int'), uncompressed, sha1 hashes, several shards
  mds_write.py text OUT TEXT N                     N windows of a text: tokens (bytes of 128 characters as
                                                   'ndarray:uint16:128'), the window ('str'), its offset ('int64'),
                                                   a 'float64', 'bytes' and 'json' column; zstd, sha1 and xxh64
  mds_write.py images OUT IMAGES_GZ N             the first N Fashion-MNIST images as 'jpeg' and 'png' (mode L),
                                                   in color (mode RGB, the image tinted per channel) as 'jpeg',
                                                   'png', 'list[png]' and 'jpeg_array' (the gray and color JPEGs)
  mds_write.py mixed OUT                           8 random 'pil' images with 'int' labels 0..7: seven of 28x28,
                                                   sample 6 of 24x24 (a data set with one odd image)
  mds_write.py read OUT I...                       prints the samples at I... as read by streaming.StreamingDataset
"""
import gzip
import io
import json
import random
import sys
import time

import numpy as np
from PIL import Image
from streaming import MDSWriter, StreamingDataset


def open_dataset(**kwargs):
    """streaming.StreamingDataset(**kwargs). It picks a free shared-memory prefix and then creates it, so two processes
    starting at once (ctest -j2 runs two of these) can pick the same one, and the later one gets FileExistsError; it
    tries again, as a later start would (seen once in a clean-clone CI run)."""
    for _ in range(20):
        try:
            return StreamingDataset(**kwargs)
        except FileExistsError:
            time.sleep(0.1 + 0.4 * random.random())
    return StreamingDataset(**kwargs)


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "fashion":
        images = np.frombuffer(gzip.open(sys.argv[3]).read()[16:], np.uint8).reshape(-1, 28, 28)
        labels = np.frombuffer(gzip.open(sys.argv[4]).read()[8:], np.uint8)
        n = int(sys.argv[5])
        with MDSWriter(out=out, columns={"image": "pil", "label": "int"}, hashes=["sha1"],
                       size_limit=1 << 16) as w:
            for i in range(n):
                w.write({"image": Image.fromarray(images[i]), "label": int(labels[i])})
    elif kind == "images":
        images = np.frombuffer(gzip.open(sys.argv[3]).read()[16:], np.uint8).reshape(-1, 28, 28)
        n = int(sys.argv[4])
        columns = {"gray_jpeg": "jpeg", "gray_png": "png", "rgb_jpeg": "jpeg", "rgb_png": "png", "pngs": "list[png]",
                   "jpegs": "jpeg_array"}
        with MDSWriter(out=out, columns=columns, size_limit=1 << 16) as w:
            for i in range(n):
                gray = Image.fromarray(images[i])
                rgb = Image.fromarray(np.stack([images[i], 255 - images[i], images[i] // 2 + 64], -1))
                jpeg = io.BytesIO()
                gray.save(jpeg, format="JPEG")
                w.write({"gray_jpeg": gray, "gray_png": gray, "rgb_jpeg": rgb, "rgb_png": rgb, "pngs": [rgb, rgb],
                         "jpegs": [jpeg.getvalue(), jpeg.getvalue()]})
    elif kind == "text":
        text = open(sys.argv[3], encoding="utf-8", errors="replace").read()
        n = int(sys.argv[4])
        with MDSWriter(out=out, columns={"tokens": "ndarray:uint16:128", "text": "str", "offset": "int64",
                                         "score": "float64", "raw": "bytes", "meta": "json"},
                       compression="zstd:7", hashes=["sha1", "xxh64"], size_limit=1 << 15) as w:
            for i in range(n):
                window = text[i * 97:i * 97 + 128].ljust(128)
                tokens = np.array([ord(c) % 65536 for c in window], np.uint16)
                w.write({"tokens": tokens, "text": window, "offset": i * 97, "score": i / 7.0,
                         "raw": window.encode("utf-8"), "meta": {"i": i}})
    elif kind == "mixed":
        rng = np.random.default_rng(0)
        with MDSWriter(out=out, columns={"image": "pil", "label": "int"}, size_limit=1 << 12) as w:
            for i in range(8):
                side = 24 if i == 6 else 28
                w.write({"image": Image.fromarray(rng.integers(0, 256, (side, side), np.uint8)), "label": i})
    elif kind == "pkl":
        with MDSWriter(out=out, columns={"obj": "pkl", "label": "int"}) as w:
            w.write({"obj": {"a": 1}, "label": 1})
    elif kind == "read":
        ds = open_dataset(local=out, shuffle=False, batch_size=1)
        rows = {}
        for i in map(int, sys.argv[3:]):
            s = ds[i]
            rows[i] = {k: ([np.asarray(e).tolist() for e in v] if isinstance(v, list) else
                           np.asarray(v).tolist() if not isinstance(v, (str, bytes, dict, int, float)) else
                           v.decode() if isinstance(v, bytes) else v) for k, v in s.items()}
        print(json.dumps(rows))
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
