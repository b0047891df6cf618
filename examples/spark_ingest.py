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

Examples (PySpark 3.5 on Java 17; `scripts/install --spark` installs it):
  python examples/spark_ingest.py --dataset pets --folder images/train --split train --job pets-v1
  spark-submit --master spark://head:7077 examples/spark_ingest.py --dataset pets \\
      --parquet listing.parquet --base /mnt/shared/pets --partitions 64 --job pets-v1 --hosts 10.0.0.5

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
            d = row.asDict()
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
    # Two attempts of one task at once would write the same source_id
    # concurrently (duplicates): a speculative copy must never start.
    conf = listing.sparkSession.sparkContext.getConf()
    if conf.get("spark.speculation", "false").lower() == "true":
        raise ValueError("spark.speculation is on: a speculative copy of a task would write the same source_id "
                         "at the same time as the original; run this job with spark.speculation=false")
    # A retry finds its rows by their order sorted by path: only unique
    # paths give every attempt the same order.
    check_unique_paths(listing)
    parts = listing.repartition(partitions, "path").sortWithinPartitions("path")
    job = parts.rdd.mapPartitionsWithIndex(lambda i, rows: write_partition(cfg, i, rows, after_add))
    return sorted(job.collect(), key=lambda r: r.partition)


# -- command line -----------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--folder", help="DIR/<class>/<file> image folder (listed on the driver)")
    src.add_argument("--parquet", help="Parquet listing: file or folder")
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
    p.add_argument("--no-labels", action="store_true", help="--folder: store no label (label kind none)")
    p.add_argument("--master", default=None, help="Spark master when not run by spark-submit (default: local[*])")
    p.add_argument("--hosts", default=None, help="contact points (default: $CQLSTREAM_HOSTS or 127.0.0.1)")
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--keyspace", default=None)
    return p


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
        cfg = IngestConfig(dataset=args.dataset, split=args.split, job=args.job, kind=args.kind,
                           label_kind=label_kind, classes=tuple(classes) if classes is not None else None,
                           base=base, hosts=args.hosts, port=args.port, keyspace=args.keyspace)
        partitions = args.partitions or spark.sparkContext.defaultParallelism
        try:
            results = ingest(listing, cfg, partitions)
        except ValueError as e:  # the driver's refusals: speculation on, paths not unique
            raise SystemExit(f"spark_ingest: {e}") from None
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
