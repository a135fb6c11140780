"""The reference side of bench/streaming.sh: one epoch of MDS shards through MosaicML Streaming's StreamingDataset
and a torch DataLoader (the same batch size and workers as ours), images and labels as tensors."""
import sys
import time

import numpy as np
import torch
from streaming import StreamingDataset
from torch.utils.data import DataLoader


class Tensors(StreamingDataset):
    def __getitem__(self, i):
        s = super().__getitem__(i)
        return torch.from_numpy(np.asarray(s["image"])).unsqueeze(0), s["label"]


def main():
    remote, local, batch, workers = sys.argv[1] or None, sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    t0 = time.perf_counter()
    ds = Tensors(remote=remote, local=local, batch_size=batch, shuffle=False)
    n = 0
    for images, labels in DataLoader(ds, batch_size=batch, num_workers=workers):
        n += images.shape[0]
    dt = time.perf_counter() - t0
    print(f"RESULT impl=python where={'s3' if remote else 'local'} samples={n} seconds={dt:.3f} "
          f"samples_per_s={n / dt:.0f}", flush=True)


if __name__ == "__main__":
    main()
