#!/usr/bin/env python3
"""Distributed ingest with PySpark: one cqlstream.Writer per Spark partition, exactly once.

Every partition of the listing is written by one cqlstream.Writer whose
source_id is "<job>/part-<partition id>". A writer is resumable and
idempotent by source_id and position: when Spark retries a failed task (an
executor lost, a worker killed, an exception half-way through), the new
attempt reopens the same source, skips the positions the failed attempt
already committed and writes the rest, so no sample is ever stored twice.
Re-running the whole job with the same --job and --partitions does the same
for every partition (a finished run writes nothing).

That needs each partition to hold the same rows in the same order on every
attempt: the listing is hash-partitioned by path and sorted by path within
each partition (deterministic, whatever the input files' layout), and the
rows are never shuffled randomly. So every path must be unique: rows that
share a path would keep the shuffle's order among themselves, which may
differ between attempts (a retry would then skip one and write another
twice); the driver refuses such a listing before any task runs. Keep --job
and --partitions when resuming.
Two attempts of one task must never run at once, so the job refuses to run
with spark.speculation on.

Listings:
  --folder DIR        DIR/<class>/<file>, listed on the driver; the class is
                      the sub-folder's name (sorted names -> class indices)
  --parquet PATH      a Parquet file or folder with a path column (--path-column)
                      and optionally a label column (--label-column: strings are
                      class names, integers class indices) and the bytes
                      themselves (--data-column, e.g. spark.read.format("binaryFile")
                      output); without a data column the executors read each
                      path (relative paths against --base), so the files must be
                      on storage every executor sees.
  --webdataset SPEC   WebDataset tar shards: a .tar file, a folder (its *.tar,
                      *.tar.gz, *.tgz files) or a text file naming one shard
                      per line (relative names against --base, else the text
                      file's folder). Each task reads whole shards with
                      Python's tarfile, in shard order and tar order, and groups
                      consecutive members by key as WebDataset does
                      (`dir/000017.jpg` + `dir/000017.cls`: key `dir/000017`).
                      The image is the member whose extension is in
                      --wds-data-ext (exactly one per sample); the label,
                      with --wds-label-ext (default cls), the integer class
                      index in that member's text
                      (classes "0".."max"), or no label with --no-labels. A
                      sample's path is "<shard>/<data member>", as
                      `cqlstream ingest` of the shards names it. Partition i
                      writes the i-th contiguous slice of the sorted shard list,
                      so keep the shard list, --job and --partitions when
                      resuming.

Examples (PySpark 3.5 on Java 17; `scripts/install --spark` installs it):
  python examples/spark_ingest.py --dataset pets --folder images/train --split train --job pets-v1
  spark-submit --master spark://head:7077 examples/spark_ingest.py --dataset pets \\
      --parquet listing.parquet --base /mnt/shared/pets --partitions 64 --job pets-v1 --hosts 10.0.0.5
  python examples/spark_ingest.py --dataset pets --webdataset /mnt/shared/pets-wds --job pets-wds-v1

Connection options (--hosts, --port, --keyspace) default, as everywhere in
cqlstream, to the CQLSTREAM_* environment variables of the executors; give
credentials there (e.g. spark.executorEnv.CQLSTREAM_PASSWORD_FILE), never on
the command line. The writer itself: help(cqlstream.Writer).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: Called after every add with (writer, partition id, rows added so far in
#: this attempt); tests use it to make a task fail part-way.
AfterAdd = Callable[[Any, int, int], None]

#: The most classes a dataset may have (store::kMaxClasses, src/store/schema.h).
MAX_CLASSES = 1 << 20


@dataclasses.dataclass(frozen=True)
class IngestConfig:
    """What every partition's writer needs; pickled to the executors."""

    dataset: str
    split: str
    job: str
    kind: str = "image"
    label_kind: str = "class"
    classes: tuple[str, ...] | None = None
    base: str | None = None
    data_exts: tuple[str, ...] = ("jpg", "jpeg", "png")  # WebDataset: the sample's data member
    label_ext: str = "cls"                                # WebDataset: the label member
    hosts: str | None = None
    port: int | None = None
    keyspace: str | None = None

    def source_id(self, partition_id: int) -> str:
        return f"{self.job}/part-{partition_id}"


@dataclasses.dataclass(frozen=True)
class PartResult:
    """One partition's outcome, as the task attempt that finished it saw it."""

    partition: int
    attempt: int
    rows: int          # rows of the partition
    written: int       # samples this attempt wrote
    resumed: int       # samples an earlier attempt had already committed (skipped)


# -- listings ---------------------------------------------------------------------

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def list_folder(root: str, kind: str = "image") -> tuple[list[tuple[str, str]], list[str]]:
    """(relative path, class name) for every file of root/<class>/..., and the
    sorted class names. Images only (by suffix) when kind is "image"."""
    if not os.path.isdir(root):
        raise SystemExit(f"--folder {root!r} is not a directory")
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith("."))
    if not classes:
        raise SystemExit(f"--folder {root!r} has no class sub-folders (expected DIR/<class>/<file>)")
    rows = []
    for cls in classes:
        for dirpath, dirnames, files in os.walk(os.path.join(root, cls)):
            dirnames.sort()
            for f in sorted(files):
                if f.startswith(".") or (kind == "image" and not f.lower().endswith(IMAGE_SUFFIXES)):
                    continue
                rows.append((os.path.relpath(os.path.join(dirpath, f), root), cls))
    if not rows:
        raise SystemExit(f"--folder {root!r} holds no {'images' if kind == 'image' else 'files'}")
    return rows, classes


def folder_listing(spark: Any, root: str, kind: str = "image") -> tuple[Any, list[str]]:
    """The folder as a DataFrame (path, label) and its class names."""
    rows, classes = list_folder(root, kind)
    return spark.createDataFrame(rows, "path string, label string"), classes


def parquet_listing(spark: Any, path: str, path_column: str, label_column: str | None,
                    data_column: str | None) -> tuple[Any, list[str] | None, str]:
    """The Parquet listing as a DataFrame (path[, label][, data]), its class
    names (None without labels) and the label kind."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    df = spark.read.parquet(path)
    cols = {c.lower(): c for c in df.columns}
    for name, col in (("--path-column", path_column), ("--label-column", label_column),
                      ("--data-column", data_column)):
        if col is not None and col.lower() not in cols:
            raise SystemExit(f"{name} {col!r} is not a column of {path} (columns: {', '.join(df.columns)})")
    picked = [F.col(path_column).cast("string").alias("path")]
    classes = None
    label_kind = "none"
    if label_column is not None:
        ltype = df.schema[cols[label_column.lower()]].dataType
        if isinstance(ltype, T.StringType):
            # Distinct class names: at most MAX_CLASSES + 1 reach the driver,
            # whatever the listing holds.
            names = df.select(label_column).where(F.col(label_column).isNotNull()).distinct()
            classes = sorted(r[0] for r in names.limit(MAX_CLASSES + 1).collect())
            if len(classes) > MAX_CLASSES:
                raise SystemExit(f"--label-column {label_column!r} has more than {MAX_CLASSES} distinct class "
                                 "names (the most a dataset can have)")
        elif isinstance(ltype, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
            lo, hi = df.agg(F.min(label_column), F.max(label_column)).collect()[0]
            classes = index_classes(label_column, lo, hi)
        else:
            raise SystemExit(f"--label-column {label_column!r} is {ltype.simpleString()}; "
                             "expected string (class names) or an integer type (class indices)")
        picked.append(F.col(label_column).cast("string").alias("label"))
        label_kind = "class"
    if data_column is not None:
        dtype = df.schema[cols[data_column.lower()]].dataType
        if not isinstance(dtype, T.BinaryType):
            raise SystemExit(f"--data-column {data_column!r} is {dtype.simpleString()}, not binary")
        picked.append(F.col(data_column).alias("data"))
    return df.select(*picked), classes, label_kind


def index_classes(label_column: str, lo: int | None, hi: int | None) -> list[str]:
    """Class names "0".."hi" for integer labels whose smallest is lo and
    largest hi (None: no label); refuses a negative index and one past the
    most classes a dataset can have, before a list that long is made."""
    if lo is not None and lo < 0:
        raise SystemExit(f"--label-column {label_column!r} has a negative class index ({lo})")
    if hi is not None and hi >= MAX_CLASSES:
        raise SystemExit(f"--label-column {label_column!r} has class index {hi}: a dataset has at most "
                         f"{MAX_CLASSES} classes (indices 0..{MAX_CLASSES - 1})")
    return [str(i) for i in range((hi or 0) + 1)]


def duplicate_paths_error(duplicates: list[tuple[str | None, int]]) -> str:
    """The message refusing a listing whose paths repeat: (path, rows) of some
    of the repeated paths."""
    shown = ", ".join(f"{p!r} ({n} rows)" for p, n in duplicates)
    return (f"the listing has rows that share a path, e.g. {shown}: every path must be unique, because a "
            "retried task finds its rows by their order sorted by path and rows with the same path have no "
            "fixed order (a retry could skip one and write another twice); remove the duplicates "
            "(e.g. dropDuplicates(['path'])) or give each row its own path")


def check_unique_paths(listing: Any, show: int = 5) -> None:
    """Raises ValueError when two rows of the listing have the same path (or
    none). One aggregation on the cluster; at most `show` paths reach the driver."""
    from pyspark.sql import functions as F

    dups = (listing.groupBy("path").count().where(F.col("count") > 1)
            .orderBy(F.col("path").asc_nulls_first()).limit(show).collect())
    if dups:
        raise ValueError(duplicate_paths_error([(r["path"], int(r["count"])) for r in dups]))


# -- WebDataset shards ------------------------------------------------------------

#: Largest tar member read (the most bytes a sample may have, store::kMaxPayloadBytes).
MAX_MEMBER_BYTES = 1 << 30
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")


def list_shards(spec: str, base: str | None = None) -> list[tuple[str, str]]:
    """(name, file) of every shard of a --webdataset SPEC, sorted by name: a
    tar file, a folder's tar files, or a text file naming one shard per line
    (relative names against base, else the text file's folder). The name
    prefixes the samples' paths. Runs on the driver; refuses repeated names."""
    if os.path.isdir(spec):
        shards = [(os.path.relpath(os.path.join(d, f), spec), os.path.join(d, f))
                  for d, _, files in os.walk(spec) for f in files if f.endswith(TAR_SUFFIXES)]
    elif spec.endswith(TAR_SUFFIXES):
        shards = [(os.path.basename(spec), spec)]
    elif os.path.isfile(spec):
        root = base if base is not None else os.path.dirname(os.path.abspath(spec))
        with open(spec, encoding="utf-8") as f:
            names = [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
        shards = [(n, n if os.path.isabs(n) else os.path.join(root, n)) for n in names]
    else:
        raise SystemExit(f"--webdataset {spec!r} is neither a tar file, a folder nor a shard list")
    shards.sort()
    if not shards:
        raise SystemExit(f"--webdataset {spec!r} names no shard (*.tar, *.tar.gz, *.tgz)")
    missing = [n for n, f in shards if not os.path.isfile(f)]
    if missing:
        raise SystemExit(f"--webdataset {spec!r}: no such shard file(s): {', '.join(map(repr, missing[:5]))}"
                         + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    repeated = sorted({n for (n, _), (m, _) in zip(shards, shards[1:]) if n == m})
    if repeated:
        raise SystemExit(f"--webdataset {spec!r} names shard(s) {', '.join(map(repr, repeated[:5]))} more "
                         "than once: each shard must be written once")
    return shards


def split_key(member: str) -> tuple[str, str] | None:
    """WebDataset's key and extension of a member name: the name up to the
    first dot of its last component, and the rest in lower case; None
    without a dot (such members are skipped, as WebDataset does)."""
    head, _, last = member.rpartition("/")
    stem, dot, ext = last.partition(".")
    if not dot or not stem:
        return None
    return (f"{head}/{stem}" if head else stem), ext.lower()


def shard_groups(name: str, path: str, wanted: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, {extension: (member name, bytes)}) of every sample of one shard
    in tar order: consecutive members with the same key. Only extensions in
    `wanted` are read (the others' bytes are None). A key that comes back after another key,
    a repeated extension, a member over MAX_MEMBER_BYTES and a damaged tar
    are ValueErrors naming the shard."""
    import tarfile

    seen: set[str] = set()
    key, members = None, {}
    try:
        with tarfile.open(path, "r:*") as tf:
            for m in tf:
                parts = split_key(m.name) if m.isfile() else None
                if parts is None:
                    continue
                if parts[0] != key:
                    if key is not None:
                        yield key, members
                    key, members = parts[0], {}
                    if key in seen:
                        raise ValueError(f"WebDataset shard {name}: key {key!r} comes back after other keys "
                                         "(a sample's members must be consecutive)")
                    seen.add(key)
                ext = parts[1]
                if ext in members:
                    raise ValueError(f"WebDataset shard {name}: sample {key!r} has two {ext!r} members")
                if ext not in wanted:
                    members[ext] = (m.name, None)
                    continue
                if m.size > MAX_MEMBER_BYTES:
                    raise ValueError(f"WebDataset shard {name}: member {m.name!r} has {m.size} bytes, "
                                     f"more than a sample may have ({MAX_MEMBER_BYTES})")
                members[ext] = (m.name, tf.extractfile(m).read())
            if key is not None:
                yield key, members
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ValueError(f"WebDataset shard {name}: cannot read it as a tar file ({e})") from None


def parse_label(name: str, key: str, ext: str, member: tuple[str, bytes | None] | None) -> int:
    """The class index of a sample's label member (decimal text)."""
    raw = member[1] if member is not None else None
    if raw is None:
        raise ValueError(f"WebDataset shard {name}: sample {key!r} has no .{ext} member (its label)")
    try:
        label = int(raw.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        raise ValueError(f"WebDataset shard {name}: {key}.{ext} is not a class index: {raw[:40]!r}") from None
    if not 0 <= label < MAX_CLASSES:
        raise ValueError(f"WebDataset shard {name}: {key}.{ext} is class {label}: expected 0..{MAX_CLASSES - 1}")
    return label


def shard_samples(cfg: IngestConfig, shards: Iterable[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """The rows (path, label, data) of the given shards, shard after shard in
    tar order. Runs on an executor."""
    labelled = cfg.label_kind == "class"
    wanted = cfg.data_exts + ((cfg.label_ext,) if labelled else ())
    for name, path in shards:
        for key, members in shard_groups(name, path, wanted):
            data = [members[e] for e in cfg.data_exts if e in members]
            if len(data) != 1:
                raise ValueError(f"WebDataset shard {name}: sample {key!r} has {len(data)} members with extension "
                                 f"{' or '.join(cfg.data_exts)}, not one (it has: {', '.join(sorted(members))})")
            label = str(parse_label(name, key, cfg.label_ext, members.get(cfg.label_ext))) if labelled else None
            yield {"path": f"{name}/{data[0][0]}", "label": label, "data": data[0][1]}


def shard_label_range(shards: Iterable[tuple[str, str]], label_ext: str) -> Iterator[tuple[int, int, int]]:
    """(samples, smallest, largest label) over some shards, reading only the
    label members. Runs on an executor (the classes pass before the ingest)."""
    n, lo, hi = 0, MAX_CLASSES, -1
    for name, path in shards:
        for key, members in shard_groups(name, path, (label_ext,)):
            label = parse_label(name, key, label_ext, members.get(label_ext))
            n, lo, hi = n + 1, min(lo, label), max(hi, label)
    yield n, lo, hi


def webdataset_classes(spark: Any, shards: list[tuple[str, str]], label_ext: str, partitions: int) -> list[str]:
    """Class names "0".."max" of the shards' labels: one Spark pass that reads
    the label members only (tar headers are skipped over, not read)."""
    rdd = spark.sparkContext.parallelize(shards, min(partitions, len(shards)))
    ranges = rdd.mapPartitions(lambda it: shard_label_range(it, label_ext)).collect()
    if sum(r[0] for r in ranges) == 0:
        raise SystemExit("the WebDataset shards hold no sample")
    return index_classes(f"--wds-label-ext {label_ext!r}", min(r[1] for r in ranges), max(r[2] for r in ranges))


# -- the per-partition writer -----------------------------------------------------


def _read(cfg: IngestConfig, path: str) -> bytes:
    full = path if os.path.isabs(path) or cfg.base is None else os.path.join(cfg.base, path)
    with open(full, "rb") as f:
        return f.read()


def write_partition(cfg: IngestConfig, partition_id: int, rows: Iterable[Any],
                    after_add: AfterAdd | None = None) -> Iterator[PartResult]:
    """Writes one partition's rows (path[, label][, data]) with one Writer
    whose source_id names the partition. Runs on an executor."""
    import cqlstream
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    index = {c: i for i, c in enumerate(cfg.classes or ())}
    n = 0
    with cqlstream.Writer(cfg.dataset, split=cfg.split, label_kind=cfg.label_kind,
                          classes=list(cfg.classes) if cfg.classes is not None else None,
                          source_id=cfg.source_id(partition_id), kind=cfg.kind,
                          hosts=cfg.hosts, port=cfg.port, keyspace=cfg.keyspace) as w:
        for row in rows:
            d = row.asDict() if hasattr(row, "asDict") else row
            path = d["path"]
            if path is None:
                raise ValueError(f"partition {partition_id}: a row without a path")
            label = None
            if cfg.label_kind == "class":
                name = d.get("label")
                if name not in index:
                    raise ValueError(f"{path}: label {name!r} is not one of the {len(index)} classes")
                label = index[name]
            data = d.get("data")
            w.add(bytes(data) if data is not None else _read(cfg, path), label=label, path=path)
            n += 1
            if after_add is not None:
                after_add(w, partition_id, n)
    yield PartResult(partition_id, attempt, n, w.written, w.resumed)


def ingest(listing: Any, cfg: IngestConfig, partitions: int,
           after_add: AfterAdd | None = None) -> list[PartResult]:
    """Writes the listing (a DataFrame with path[, label][, data]) in
    `partitions` Spark tasks; returns each partition's result."""
    refuse_speculation(listing.sparkSession.sparkContext)
    # A retry finds its rows by their order sorted by path: only unique
    # paths give every attempt the same order.
    check_unique_paths(listing)
    parts = listing.repartition(partitions, "path").sortWithinPartitions("path")
    job = parts.rdd.mapPartitionsWithIndex(lambda i, rows: write_partition(cfg, i, rows, after_add))
    return sorted(job.collect(), key=lambda r: r.partition)


def ingest_shards(spark: Any, shards: list[tuple[str, str]], cfg: IngestConfig, partitions: int,
                  after_add: AfterAdd | None = None) -> list[PartResult]:
    """Writes WebDataset shards (list_shards' sorted list) in at most
    `partitions` Spark tasks: task i reads the i-th contiguous slice of the
    list, whole shards in order, so a retry sees the same samples in the
    same order. Returns each partition's result."""
    sc = spark.sparkContext
    refuse_speculation(sc)
    rdd = sc.parallelize(shards, max(1, min(partitions, len(shards))))
    job = rdd.mapPartitionsWithIndex(lambda i, it: write_partition(cfg, i, shard_samples(cfg, it), after_add))
    return sorted(job.collect(), key=lambda r: r.partition)


def refuse_speculation(sc: Any) -> None:
    """Two attempts of one task at once would write the same source_id
    concurrently (duplicates): a speculative copy must never start."""
    if sc.getConf().get("spark.speculation", "false").lower() == "true":
        raise ValueError("spark.speculation is on: a speculative copy of a task would write the same source_id "
                         "at the same time as the original; run this job with spark.speculation=false")


# -- command line -----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--folder", help="DIR/<class>/<file> image folder (listed on the driver)")
    src.add_argument("--parquet", help="Parquet listing: file or folder")
    src.add_argument("--webdataset", help="WebDataset tar shards: a .tar, a folder of them or a list file")
    p.add_argument("--dataset", required=True, help="dataset name ([a-z][a-z0-9_]{0,23})")
    p.add_argument("--split", default="train")
    p.add_argument("--job", required=True,
                   help="job id: source_id of partition i is '<job>/part-<i>'; the same id resumes")
    p.add_argument("--partitions", type=int, default=None,
                   help="Spark tasks (writers); default: Spark's default parallelism. Keep it when resuming")
    p.add_argument("--kind", choices=("image", "blob"), default="image",
                   help="image: validated images; blob: any bytes, no validation")
    p.add_argument("--path-column", default="path")
    p.add_argument("--label-column", default=None, help="Parquet: class names (string) or indices (int)")
    p.add_argument("--data-column", default=None, help="Parquet: the samples' bytes (binary)")
    p.add_argument("--base", default=None, help="folder that relative Parquet paths are read from")
    p.add_argument("--no-labels", action="store_true",
                   help="--folder, --webdataset: store no label (label kind none)")
    p.add_argument("--wds-data-ext", default="jpg,jpeg,png",
                   help="WebDataset: extensions of the data member, one per sample (default jpg,jpeg,png)")
    p.add_argument("--wds-label-ext", default="cls", help="WebDataset: extension of the label member")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit (default: local[*])")
    p.add_argument("--hosts", default=None, help="contact points (default: $CQLSTREAM_HOSTS or 127.0.0.1)")
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--keyspace", default=None)
    return p


def run_job(spark: Any, args: argparse.Namespace) -> tuple[IngestConfig, list[PartResult]]:
    """The listing of the command line, written; (its config, the partitions' results)."""
    partitions = args.partitions or spark.sparkContext.defaultParallelism
    common = dict(dataset=args.dataset, split=args.split, job=args.job, kind=args.kind, hosts=args.hosts,
                  port=args.port, keyspace=args.keyspace)
    try:
        if args.webdataset is not None:
            shards = list_shards(args.webdataset, args.base)
            exts = tuple(e.strip().lstrip(".").lower() for e in args.wds_data_ext.split(",") if e.strip())
            if not exts:
                raise SystemExit("--wds-data-ext names no extension")
            label_ext = args.wds_label_ext.lstrip(".").lower()
            classes = None if args.no_labels else webdataset_classes(spark, shards, label_ext, partitions)
            cfg = IngestConfig(**common, label_kind="none" if args.no_labels else "class",
                               classes=tuple(classes) if classes is not None else None, data_exts=exts,
                               label_ext=label_ext)
            return cfg, ingest_shards(spark, shards, cfg, partitions)
        if args.folder is not None:
            listing, classes = folder_listing(spark, args.folder, args.kind)
            base = os.path.abspath(args.folder)
            label_kind = "class"
            if args.no_labels:
                listing, classes, label_kind = listing.select("path"), None, "none"
        else:
            listing, classes, label_kind = parquet_listing(spark, args.parquet, args.path_column,
                                                           args.label_column, args.data_column)
            base = os.path.abspath(args.base) if args.base is not None else None
        cfg = IngestConfig(**common, label_kind=label_kind, base=base,
                           classes=tuple(classes) if classes is not None else None)
        return cfg, ingest(listing, cfg, partitions)
    except ValueError as e:  # the driver's refusals: speculation on, paths not unique
        raise SystemExit(f"spark_ingest: {e}") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.partitions is not None and args.partitions < 1:
        raise SystemExit("--partitions must be at least 1")
    from pyspark.sql import SparkSession

    # spark-submit sets the master; a plain `python examples/spark_ingest.py`
    # gets local[*] from PySpark. A session that already runs (a notebook, a
    # test) is used and left running.
    owned = SparkSession.getActiveSession() is None
    builder = SparkSession.builder.appName(f"cqlstream ingest {args.dataset} ({args.job})")
    if args.master is not None:
        builder = builder.master(args.master)
    spark = builder.getOrCreate()
    try:
        cfg, results = run_job(spark, args)
    finally:
        if owned:
            spark.stop()
    for r in results:
        retried = f" (attempt {r.attempt + 1})" if r.attempt else ""
        print(f"{cfg.source_id(r.partition)}: {r.rows} rows, {r.written} written, "
              f"{r.resumed} already committed{retried}")
    print(f"{args.dataset}/{args.split}: {sum(r.rows for r in results)} rows in {len(results)} partitions, "
          f"{sum(r.written for r in results)} written, {sum(r.resumed for r in results)} already committed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
