#!/usr/bin/env python3
"""ResNet training on an ImageNet-style JPEG dataset streamed from Cassandra: DALI GPU decoding, DDP.

NEEDS A GPU MACHINE (CUDA, nvJPEG through DALI's "mixed" decoder, NCCL). It
cannot run on the project's CPU-only development machines or in CI; there only
its argument parsing and pipeline definitions are checked
(tests/python/test_dali_examples.py). See docs/dali.md, "GPU".

Per rank (torchrun sets RANK, LOCAL_RANK, WORLD_SIZE):
    fn.cqlstream.reader(shard_id=RANK, num_shards=WORLD_SIZE)      one shard of a global shuffle
    -> fn.decoders.image_random_crop(device="mixed")               nvJPEG on GPU LOCAL_RANK
    -> fn.resize -> fn.crop_mirror_normalize(random mirror, fp16)  on the GPU
    -> DALIGenericIterator(reader_name="Reader")                   epoch ends, padding dropped
    -> torchvision ResNet under DistributedDataParallel (NCCL), AMP, channels-last

Data (the synthetic ~110 kB JPEG set of the benchmarks):
    build/bench/cqlstream-gen-images --out /data/synth --count 100000 --classes 100
    build/src/cli/cqlstream ingest --dataset imagenet_synth /data/synth     # splits train, val

Run on one machine with 8 GPUs:
    torchrun --nproc-per-node 8 examples/imagenet_style.py --dataset imagenet_synth --arch resnet50
Resume mid-epoch (exactly once: DALI reader checkpoints, one per rank):
    ... --checkpoint-dir ckpt --save-every 500          then the same command again

Needs torchvision (not in python/requirements-dali.txt: pip install torchvision matching torch).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import cqlstream.dali as cd
from nvidia.dali import fn, pipeline_def, types

IMAGENET_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGENET_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="imagenet_synth")
    p.add_argument("--train-split", default="train")
    p.add_argument("--val-split", default="val", help="'' to skip validation")
    p.add_argument("--hosts", default=None, help="contact points (default: $CQLSTREAM_HOSTS or 127.0.0.1)")
    p.add_argument("--keyspace", default=None)
    p.add_argument("--arch", default="resnet50", help="a torchvision.models constructor name")
    p.add_argument("--num-classes", type=int, default=None, help="default: the dataset's class count")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=256, help="per GPU")
    p.add_argument("--lr", type=float, default=None, help="default: 0.1 * global batch / 256")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-5)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--dali-threads", type=int, default=4, help="DALI CPU threads per rank")
    p.add_argument("--prefetch", type=int, default=2, help="DALI prefetch queue depth")
    p.add_argument("--memory-gb", type=float, default=0, help="cqlstream loader byte budget (0: automatic)")
    p.add_argument("--no-amp", action="store_true", help="train in fp32")
    p.add_argument("--limit-batches", type=int, default=None, help="train on at most N batches per epoch")
    p.add_argument("--checkpoint-dir", default=None, help="save model, optimizer and reader state here")
    p.add_argument("--save-every", type=int, default=0, help="also checkpoint every N batches (0: per epoch)")
    p.add_argument("--seed", type=int, default=0, help="shuffle seed (the same on every rank)")
    return p


@pipeline_def
def train_pipeline(dataset: str, split: str, shard_id: int, num_shards: int, size: int, shuffle_seed: int,
                   memory_bytes: int, conn: dict):
    jpegs, labels = cd.reader(dataset, split=split, shuffle=True, seed=shuffle_seed, shard_id=shard_id,
                              num_shards=num_shards, name="Reader", memory_bytes=memory_bytes, **conn)
    images = fn.decoders.image_random_crop(jpegs, device="mixed", output_type=types.RGB,
                                           random_aspect_ratio=[0.75, 4.0 / 3.0], random_area=[0.08, 1.0])
    images = fn.resize(images, resize_x=size, resize_y=size)
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", mean=IMAGENET_MEAN,
                                      std=IMAGENET_STD, mirror=fn.random.coin_flip(probability=0.5))
    return images, labels.gpu()


@pipeline_def
def val_pipeline(dataset: str, split: str, shard_id: int, num_shards: int, size: int, memory_bytes: int,
                 conn: dict):
    jpegs, labels = cd.reader(dataset, split=split, shuffle=False, shard_id=shard_id, num_shards=num_shards,
                              name="Reader", memory_bytes=memory_bytes, **conn)
    images = fn.decoders.image(jpegs, device="mixed", output_type=types.RGB)
    images = fn.resize(images, resize_shorter=int(size / 0.875))
    images = fn.crop_mirror_normalize(images, dtype=types.FLOAT16, output_layout="CHW", crop=(size, size),
                                      mean=IMAGENET_MEAN, std=IMAGENET_STD)
    return images, labels.gpu()


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("imagenet_style.py needs a GPU (DALI mixed decoding, NCCL); see docs/dali.md", file=sys.stderr)
        return 2
    import torchvision
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    if world > 1:
        dist.init_process_group("nccl")
    torch.backends.cudnn.benchmark = True
    conn = {k: v for k, v in (("hosts", args.hosts), ("keyspace", args.keyspace)) if v is not None}
    cd.load_plugin()  # the native reader is required here (the fallback has no reader metadata per shard)

    num_classes = args.num_classes
    if num_classes is None:
        import cqlstream

        with cqlstream.Loader(args.dataset, split=args.train_split, **conn) as probe:
            num_classes = len(probe.class_names)
    budget = int(args.memory_gb * (1 << 30))
    ckpt_dir = Path(args.checkpoint_dir) if args.checkpoint_dir else None
    state = None
    if ckpt_dir and (ckpt_dir / f"rank{rank}.pt").exists():
        state = torch.load(ckpt_dir / f"rank{rank}.pt", map_location="cpu", weights_only=False)

    common = dict(batch_size=args.batch_size, num_threads=args.dali_threads, device_id=local,
                  prefetch_queue_depth=args.prefetch)
    train_pipe = make_train_pipe(args, rank, world, budget, conn, state, common)
    train = DALIGenericIterator([train_pipe], ["images", "labels"], reader_name="Reader",
                                last_batch_policy=LastBatchPolicy.PARTIAL, auto_reset=True)

    model = torchvision.models.__dict__[args.arch](num_classes=num_classes).cuda().to(
        memory_format=torch.channels_last)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    lr = args.lr if args.lr is not None else 0.1 * args.batch_size * world / 256
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=args.momentum, weight_decay=args.weight_decay)
    steps_per_epoch = len(train) if args.limit_batches is None else min(len(train), args.limit_batches)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=args.epochs * steps_per_epoch)
    scaler = torch.amp.GradScaler("cuda", enabled=not args.no_amp)
    loss_fn = torch.nn.CrossEntropyLoss()
    start_epoch, step_in_epoch = 0, 0
    if state:
        (model.module if world > 1 else model).load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        scaler.load_state_dict(state["scaler"])
        start_epoch, step_in_epoch = state["epoch"], state["step"]

    def save(epoch: int, step: int) -> None:
        if not ckpt_dir:
            return
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir / f"rank{rank}.pt.tmp"
        torch.save({"model": (model.module if world > 1 else model).state_dict(), "opt": opt.state_dict(),
                    "sched": sched.state_dict(), "scaler": scaler.state_dict(), "epoch": epoch, "step": step,
                    "dali": train.checkpoints()[0]}, tmp)
        tmp.replace(ckpt_dir / f"rank{rank}.pt")

    for epoch in range(start_epoch, args.epochs):
        model.train()
        t0, n, step = time.perf_counter(), 0, step_in_epoch
        for batch in train:
            images = batch[0]["images"].contiguous(memory_format=torch.channels_last)
            labels = batch[0]["labels"].reshape(-1).long()
            with torch.autocast("cuda", dtype=torch.float16, enabled=not args.no_amp):
                loss = loss_fn(model(images), labels)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            n += labels.numel()
            step += 1
            if args.save_every and step % args.save_every == 0:
                save(epoch, step)
            if args.limit_batches is not None and step >= args.limit_batches:
                break
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        if rank == 0:
            print(f"epoch {epoch}: {step} steps, loss {float(loss):.3f}, {n * world / dt:,.0f} images/s "
                  f"(all ranks), {dt:.0f} s", flush=True)
        if args.limit_batches is not None and step >= args.limit_batches and epoch + 1 < args.epochs:
            for _ in train:  # leave the epoch at its end so that the next one starts cleanly
                pass
        step_in_epoch = 0
        save(epoch + 1, 0)
        if args.val_split:
            acc = validate(model, args, rank, world, budget, conn, common)
            if rank == 0:
                print(f"epoch {epoch}: val top-1 {acc:.4f}", flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


def make_train_pipe(args, rank, world, budget, conn, state, common):
    """The training pipeline of this rank, restored from the rank's reader checkpoint when resuming."""
    extra = {"checkpoint": state["dali"]} if state else {}
    return train_pipeline(dataset=args.dataset, split=args.train_split, shard_id=rank, num_shards=world,
                          size=args.image_size, shuffle_seed=args.seed, memory_bytes=budget, conn=conn,
                          enable_checkpointing=True, **extra, **common)


def validate(model, args, rank, world, budget, conn, common) -> float:
    import torch
    import torch.distributed as dist
    from nvidia.dali.plugin.base_iterator import LastBatchPolicy
    from nvidia.dali.plugin.pytorch import DALIGenericIterator

    pipe = val_pipeline(dataset=args.dataset, split=args.val_split, shard_id=rank, num_shards=world,
                        size=args.image_size, memory_bytes=budget, conn=conn, **common)
    it = DALIGenericIterator([pipe], ["images", "labels"], reader_name="Reader",
                             last_batch_policy=LastBatchPolicy.PARTIAL)
    model.eval()
    correct = torch.zeros(2, device="cuda")
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=not args.no_amp):
        for batch in it:
            images = batch[0]["images"].contiguous(memory_format=torch.channels_last)
            labels = batch[0]["labels"].reshape(-1).long()
            correct[0] += (model(images).argmax(1) == labels).sum()
            correct[1] += labels.numel()
    if world > 1:
        dist.all_reduce(correct)
    return float(correct[0] / correct[1].clamp(min=1))


if __name__ == "__main__":
    sys.exit(main())
