"""cqlstream.torch: tensors, DataLoader rules, sharding over torch.distributed, checkpoints."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import cqlstream
import cqlstream.torch as ct
import ddp_worker


def test_loader_yields_image_and_label_tensors(images, loader_kwargs):
    n = images.count("train")
    with ct.loader(images.name, batch_size=16, decode=(20, 18, 1), **loader_kwargs) as train:
        assert len(train) == math.ceil(n / 16)
        seen = 0
        for epoch in range(2):  # epochs=1: the second one is empty
            for imgs, labels in train:
                assert imgs.dtype == torch.uint8 and tuple(imgs.shape[1:]) == (1, 20, 18)
                assert labels.dtype == torch.int64 and labels.shape == (imgs.shape[0],)
                assert int(labels.min()) >= 0 and int(labels.max()) < 3
                # NCHW is a view of the NHWC frames: no copy was made.
                assert imgs.permute(0, 2, 3, 1).is_contiguous()
                seen += imgs.shape[0]
        assert seen == n
    with ct.loader(images.name, batch_size=16, decode=(20, 18), layout="NHWC", **loader_kwargs) as train:
        imgs, _ = next(iter(train))
        assert tuple(imgs.shape[1:]) == (20, 18, 3) and imgs.is_contiguous()


def test_raw_mode_yields_batches(images, loader_kwargs):
    with ct.loader(images.name, batch_size=16, **loader_kwargs) as train:
        batch, labels = next(iter(train))
        assert isinstance(batch, cqlstream.Batch)
        assert labels.tolist() == batch.labels.tolist()


def test_dataloader_workers_are_refused(images, loader_kwargs):
    n = images.count("train")
    ds = ct.StreamDataset(images.name, batch_size=16, decode=(8, 8), **loader_kwargs)
    with pytest.raises(RuntimeError, match="num_workers=0"):
        list(DataLoader(ds, batch_size=None, num_workers=2))
    # The supported way: the dataset batches, the DataLoader only passes items on.
    items = list(DataLoader(ds, batch_size=None, num_workers=0))
    assert sum(x.shape[0] for x, _ in items) == n
    ds.close()


def test_rank_and_world_from_the_environment(images, loader_kwargs, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with ct.StreamDataset(images.name, batch_size=8, **loader_kwargs) as ds:
        assert (ds.loader.rank, ds.loader.world_size) == (1, 2)
        assert sum(len(b) for b, _ in ds) == images.count("train") // 2


def test_adapter_state_dict_resumes_exactly_once(images, loader_kwargs):
    n = images.count("train")
    kw = dict(batch_size=10, seed=8, **loader_kwargs)
    with ct.StreamDataset(images.name, **kw) as a:
        it = iter(a)
        first = [next(it)[0] for _ in range(3)]
        state = a.state_dict()
        keys = [int(k) for b in first for k in b.keys]
    b = ct.StreamDataset(images.name, **kw)
    b.load_state_dict(state)  # before the loader opens: applied when it does
    keys += [int(k) for batch, _ in b for k in batch.keys]
    b.close()
    assert len(keys) == n and len(set(keys)) == n


def test_ddp_two_processes_read_each_sample_once(images, hosts, tmp_path):
    torch.multiprocessing.spawn(ddp_worker.run, args=(2, str(tmp_path / "pg"), images.name, hosts, str(tmp_path)),
                                nprocs=2, join=True)
    k0 = set(np.load(tmp_path / "keys0.npy").tolist())
    k1 = set(np.load(tmp_path / "keys1.npy").tolist())
    n = images.count("train")
    assert not (k0 & k1)
    assert len(k0) + len(k1) == n and abs(len(k0) - len(k1)) <= 1
