"""A rank of the 2-process DDP-style test (spawned by torch.multiprocessing; see test_torch.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch.distributed as dist

import cqlstream.torch as ct


def run(rank: int, world: int, init_file: str, dataset: str, hosts: str, out_dir: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        # rank and world size come from the default process group.
        ds = ct.StreamDataset(dataset, batch_size=8, seed=4, hosts=hosts)
        assert (ds.loader.rank, ds.loader.world_size) == (rank, world)
        keys = []
        for batch, labels in ds:  # raw mode: (Batch, labels)
            assert labels.shape == (len(batch),)
            keys += [int(k) for k in batch.keys]
        states = ct.gather_state_dicts(ds)
        assert [s["rank"] for s in states] == list(range(world))
        np.save(Path(out_dir) / f"keys{rank}.npy", np.array(keys, dtype=np.uint64))
        ds.close()
        dist.barrier()
    finally:
        dist.destroy_process_group()
