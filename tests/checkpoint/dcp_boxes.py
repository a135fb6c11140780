"""Writes a torch.distributed.checkpoint directory (argv[1]) whose tensors are stored in boxes that are not ranges of
their row-major flattening: state/model/w (6 x 10 float64, arange) in column halves and state/model/v (7 float64,
arange) in two row pieces, each box in a file of its own. One process (a Gloo group of one, in-process store), the
boxes as the local shards of ShardedTensors. Prints the file that holds w's right half."""
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
from torch.distributed._shard.metadata import ShardMetadata


def boxed(whole, boxes):
    shards = []
    for offsets, sizes in boxes:
        index = tuple(slice(o, o + s) for o, s in zip(offsets, sizes))
        meta = ShardMetadata(shard_offsets=list(offsets), shard_sizes=list(sizes), placement="rank:0/cpu")
        shards.append(Shard(whole[index].contiguous(), meta))
    return init_from_local_shards(shards, list(whole.shape))


dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
w = boxed(torch.arange(60, dtype=torch.float64).reshape(6, 10), [((0, 0), (6, 5)), ((0, 5), (6, 5))])
v = boxed(torch.arange(7, dtype=torch.float64), [((0,), (4,)), ((4,), (3,))])
writer = dcp.FileSystemWriter(sys.argv[1], single_file_per_rank=False)
dcp.save({"state": {"model": {"w": w, "v": v}}}, storage_writer=writer)
metadata = dcp.FileSystemReader(sys.argv[1]).read_metadata()
for index, info in metadata.storage_data.items():
    if index.fqn == "state.model.w" and list(index.offset) == [0, 5]:
        print("RIGHT_HALF", info.relative_path)
dist.destroy_process_group()
