"""examples/spark_ingest.py on PySpark in local mode against the real node.

Spark runs local[2,2]: two task slots and maxFailures 2, so a failed task is
retried once. One task is made to fail once, after part of its partition is
committed, by killing its Python worker (what a lost executor looks like to
the job). Afterwards the dataset must hold every generated file exactly
once, byte-identical, read back with cqlstream.Loader; the retried partition
must have resumed (skipped what the failed attempt committed) rather than
rewritten; a second run of the same job writes nothing.

PySpark is not in .venv: scripts/test's spark stage installs it
(scripts/install --spark) and puts it on PYTHONPATH with CQLSTREAM_TEST_SPARK=1,
which turns a missing PySpark into a failure instead of a skip.
"""

from __future__ import annotations

import collections
import os
import sys

import pytest

from conftest import HOSTS, ROOT, run_cli, unique_name, write_image_set

if os.environ.get("CQLSTREAM_TEST_SPARK") == "1":
    import pyspark  # noqa: F401  (required: fail here, loudly)
else:
    pytest.importorskip("pyspark", reason="PySpark is not installed: scripts/test --only spark runs this test")

import cqlstream

sys.path.insert(0, str(ROOT / "examples"))
import spark_ingest  # noqa: E402

PER_CLASS = 100        # 3 classes: 300 files
PARTITIONS = 4
FAIL_PARTITION = 1
FAIL_AFTER = 40        # rows added by the failing attempt before it dies


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # The executors' Python is this interpreter (its cqlstream), not the
    # `python3` on PATH; the variables reach the JVM and its Python workers.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    s = (SparkSession.builder.master("local[2,2]")
         .appName("cqlstream spark_ingest test")
         .config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", str(PARTITIONS))
         .config("spark.driver.memory", "512m")
         .getOrCreate())
    s.sparkContext.setLogLevel("ERROR")
    # As spark-submit --py-files would: the executors import the example's
    # module (write_partition) from the copy Spark ships them.
    s.sparkContext.addPyFile(str(ROOT / "examples" / "spark_ingest.py"))
    yield s
    s.stop()


@pytest.fixture()
def folder(tmp_path):
    samples = write_image_set(tmp_path / "images", {"train": PER_CLASS}, seed=7)
    root = tmp_path / "images" / "train"
    files = {str(s.path.relative_to(root)): s.data for s in samples}
    assert len(files) == 3 * PER_CLASS and len(set(files.values())) == len(files)
    return root, files


@pytest.fixture()
def dataset():
    name = unique_name("py_spark")
    yield name
    run_cli("drop", name, "--yes", check=False)


def crash_once(marker: str, partition: int, after: int):
    """An after_add hook: the first attempt of `partition` flushes what it
    added (so a committed prefix exists) and kills its Python worker after
    `after` rows. The marker file makes it happen once."""

    def hook(writer, partition_id, n):
        if partition_id == partition and n == after and not os.path.exists(marker):
            writer.flush()
            with open(marker, "w") as f:
                f.write(f"partition {partition_id} died after {n} rows\n")
            os._exit(17)

    return hook


def read_back(name: str, split: str) -> tuple[dict[str, bytes], collections.Counter]:
    """path -> bytes of every sample the loader delivers in one epoch, and
    how often each path was delivered."""
    with cqlstream.Dataset(name, hosts=HOSTS) as ds:
        meta = ds.metadata(split)
        rows = meta.to_dict("records") if hasattr(meta, "to_dict") else meta
        path_of = {int(r["key"]): r["path"] for r in rows}
    assert len(path_of) == len(rows), "two metadata rows share a key"
    got: dict[str, bytes] = {}
    seen: collections.Counter = collections.Counter()
    with cqlstream.Loader(name, split=split, batch_size=64, shuffle=False, epochs=1, hosts=HOSTS) as loader:
        for batch in loader:
            for i in range(len(batch)):
                key = int(batch.keys[i])
                off, size = int(batch.offsets[i]), int(batch.sizes[i])
                path = path_of[key]
                seen[path] += 1
                got[path] = bytes(batch.data[off:off + size])
    return got, seen


def test_spark_ingest_exactly_once_after_a_failed_task(spark, folder, dataset, tmp_path):
    root, files = folder
    listing, classes = spark_ingest.folder_listing(spark, str(root))
    assert classes == ["cat", "dog", "fish"]
    cfg = spark_ingest.IngestConfig(dataset=dataset, split="train", job="test-job", classes=tuple(classes),
                                    base=str(root), hosts=HOSTS)
    marker = tmp_path / "crashed"
    results = spark_ingest.ingest(listing, cfg, PARTITIONS,
                                  after_add=crash_once(str(marker), FAIL_PARTITION, FAIL_AFTER))

    # The failure happened, Spark retried that task, and the retry resumed.
    assert marker.exists(), "the injected failure never ran"
    assert [r.partition for r in results] == list(range(PARTITIONS))
    assert sum(r.rows for r in results) == len(files)
    for r in results:
        assert r.written + r.resumed == r.rows, r
        if r.partition == FAIL_PARTITION:
            assert r.attempt == 1, f"partition {r.partition} was not retried: {r}"
            assert r.rows > FAIL_AFTER
            assert r.resumed >= FAIL_AFTER, f"the retry rewrote what the failed attempt committed: {r}"
        else:
            assert (r.attempt, r.resumed) == (0, 0), r

    # Complete, exactly once, byte-identical.
    got, seen = read_back(dataset, "train")
    assert set(got) == set(files), (sorted(set(files) - set(got))[:5], sorted(set(got) - set(files))[:5])
    assert [p for p, c in seen.items() if c != 1] == []
    assert [p for p in files if got[p] != files[p]] == []
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.count("train") == len(files)
        assert ds.class_names == classes

    # The same job again: every partition finds its source committed.
    again = spark_ingest.ingest(listing, cfg, PARTITIONS)
    assert sum(r.written for r in again) == 0, again
    assert sum(r.resumed for r in again) == len(files), again
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.count("train") == len(files)


def test_spark_ingest_parquet_listing_command_line(spark, folder, dataset, tmp_path):
    """The command line on a Parquet listing (path, integer label) read from --base."""
    root, files = folder
    classes = ["cat", "dog", "fish"]
    listing = spark.createDataFrame([(p, classes.index(p.split("/")[0])) for p in sorted(files)],
                                    "path string, label int")
    parquet = tmp_path / "listing.parquet"
    listing.write.parquet(str(parquet))
    assert spark_ingest.main(["--dataset", dataset, "--parquet", str(parquet), "--label-column", "label",
                              "--base", str(root), "--job", "cli-job", "--partitions", "3",
                              "--hosts", HOSTS]) == 0
    got, seen = read_back(dataset, "train")
    assert set(got) == set(files) and all(c == 1 for c in seen.values())
    assert [p for p in files if got[p] != files[p]] == []
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.class_names == ["0", "1", "2"]
        meta = ds.metadata("train")
        rows = meta.to_dict("records") if hasattr(meta, "to_dict") else meta
        assert all(r["label"] == classes.index(r["path"].split("/")[0]) for r in rows)


def test_spark_ingest_inline_bytes_as_blobs(spark, folder, dataset, tmp_path):
    """A Parquet listing that carries the bytes (spark.read.format("binaryFile")
    output), written as kind blob without labels: the executors read no file."""
    from pyspark.sql import functions as F

    root, files = folder
    prefix = root.resolve().as_uri().replace("file:///", "file:/") + "/"
    listing = (spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(str(root))
               .select(F.expr(f"substring(path, {len(prefix) + 1})").alias("path"), F.col("content").alias("bytes")))
    parquet = tmp_path / "inline.parquet"
    listing.write.parquet(str(parquet))
    moved = tmp_path / "moved"
    root.rename(moved)  # the files are gone: only the listing's bytes can be written
    assert spark_ingest.main(["--dataset", dataset, "--parquet", str(parquet), "--data-column", "bytes",
                              "--kind", "blob", "--job", "blob-job", "--partitions", "2", "--hosts", HOSTS]) == 0
    got, seen = read_back(dataset, "train")
    assert set(got) == set(files) and all(c == 1 for c in seen.values())
    assert [p for p in files if got[p] != files[p]] == []
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.label_kind == "none"


def test_spark_ingest_refuses_duplicate_paths(spark, dataset, tmp_path):
    """Rows that share a path have no fixed order within their partition, so a
    retry could skip one and write another twice: the driver refuses the
    listing before any task runs (nothing is written) and names the paths."""
    rows = [("a.jpg", "cat"), ("b.jpg", "dog"), ("a.jpg", "cat"), ("c.jpg", "cat"), ("a.jpg", "dog"),
            ("c.jpg", "dog")]
    listing = spark.createDataFrame(rows, "path string, label string")
    cfg = spark_ingest.IngestConfig(dataset=dataset, split="train", job="dup-job", classes=("cat", "dog"),
                                    base=str(tmp_path), hosts=HOSTS)
    with pytest.raises(ValueError, match=r"share a path, e\.g\. 'a\.jpg' \(3 rows\), 'c\.jpg' \(2 rows\): "
                                         r"every path must be unique"):
        spark_ingest.ingest(listing, cfg, PARTITIONS)
    assert run_cli("info", dataset, check=False).returncode != 0  # no dataset was created
    # The command line says the same, without a traceback.
    parquet = tmp_path / "dups.parquet"
    listing.write.parquet(str(parquet))
    with pytest.raises(SystemExit, match="every path must be unique"):
        spark_ingest.main(["--dataset", dataset, "--parquet", str(parquet), "--job", "dup-job",
                           "--partitions", "2", "--hosts", HOSTS])


def test_integer_labels_are_bounded_by_the_most_classes():
    """Integer labels become class names "0".."max": a huge label is refused
    before a list that long is made, as is a negative one."""
    assert spark_ingest.index_classes("label", 0, 2) == ["0", "1", "2"]
    assert spark_ingest.index_classes("label", None, None) == ["0"]
    top = spark_ingest.MAX_CLASSES - 1
    assert len(spark_ingest.index_classes("label", 0, top)) == spark_ingest.MAX_CLASSES
    with pytest.raises(SystemExit, match=r"class index 1048576: a dataset has at most 1048576 classes"):
        spark_ingest.index_classes("label", 0, top + 1)
    with pytest.raises(SystemExit, match=r"class index 1000000000"):
        spark_ingest.index_classes("label", 0, 10**9)
    with pytest.raises(SystemExit, match="negative class index"):
        spark_ingest.index_classes("label", -1, 3)


def test_parquet_integer_label_past_the_most_classes_is_refused(spark, dataset, tmp_path):
    listing = spark.createDataFrame([("a.jpg", 0), ("b.jpg", 10**9)], "path string, label long")
    parquet = tmp_path / "big_label.parquet"
    listing.write.parquet(str(parquet))
    with pytest.raises(SystemExit, match="class index 1000000000"):
        spark_ingest.main(["--dataset", dataset, "--parquet", str(parquet), "--label-column", "label",
                           "--job", "big-job", "--hosts", HOSTS])


# -- WebDataset shards ----------------------------------------------------------------

WDS_SHARDS = 6


def write_tar(path, members: list[tuple[str, bytes]]) -> None:
    import io
    import tarfile

    with tarfile.open(path, "w:gz" if str(path).endswith((".tar.gz", ".tgz")) else "w") as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


@pytest.fixture()
def wds(folder, tmp_path):
    """The folder's 300 images as WebDataset shards (WDS_SHARDS tars, one of
    them gzipped; each sample <key>.<jpg|png> + <key>.cls + an ignored
    <key>.json), in an order that mixes the classes: (shard folder,
    {sample path: (bytes, class index)})."""
    root, files = folder
    classes = ["cat", "dog", "fish"]
    shard_dir = tmp_path / "wds"
    shard_dir.mkdir()
    order = sorted(files, key=lambda p: (p.split("/")[1], p))  # 000.png of every class, then 001 ...
    expected = {}
    for s in range(WDS_SHARDS):
        name = f"shard-{s:03d}.tar" + (".gz" if s == 2 else "")
        members = []
        for i, p in enumerate(order[s::WDS_SHARDS]):
            key, ext = f"sub/{s:02d}{i:04d}", p.rsplit(".", 1)[1]
            label = classes.index(p.split("/")[0])
            members += [(f"{key}.{ext}", files[p]), (f"{key}.cls", f"{label}\n".encode()),
                        (f"{key}.json", b'{"from": "%s"}' % p.encode())]
            expected[f"{name}/{key}.{ext}"] = (files[p], label)
        write_tar(shard_dir / name, members)
    assert len(expected) == len(files)
    return shard_dir, expected


def test_spark_ingest_webdataset_exactly_once_after_a_failed_task(spark, wds, dataset, tmp_path):
    shard_dir, expected = wds
    shards = spark_ingest.list_shards(str(shard_dir))
    assert [n for n, _ in shards] == sorted(n for n, _ in shards) and len(shards) == WDS_SHARDS
    classes = spark_ingest.webdataset_classes(spark, shards, "cls", PARTITIONS)
    assert classes == ["0", "1", "2"]
    cfg = spark_ingest.IngestConfig(dataset=dataset, split="train", job="wds-job", classes=tuple(classes),
                                    hosts=HOSTS)
    marker = tmp_path / "crashed"
    results = spark_ingest.ingest_shards(spark, shards, cfg, PARTITIONS,
                                         after_add=crash_once(str(marker), FAIL_PARTITION, FAIL_AFTER))
    assert marker.exists(), "the injected failure never ran"
    assert [r.partition for r in results] == list(range(PARTITIONS))
    assert sum(r.rows for r in results) == len(expected)
    for r in results:
        assert r.written + r.resumed == r.rows, r
        if r.partition == FAIL_PARTITION:
            assert r.attempt == 1 and r.resumed >= FAIL_AFTER, f"not retried, or the retry rewrote: {r}"
        else:
            assert (r.attempt, r.resumed) == (0, 0), r

    got, seen = read_back(dataset, "train")
    assert set(got) == set(expected), (sorted(set(expected) - set(got))[:5], sorted(set(got) - set(expected))[:5])
    assert [p for p, c in seen.items() if c != 1] == []
    assert [p for p in expected if got[p] != expected[p][0]] == []
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.count("train") == len(expected) and ds.class_names == classes
        meta = ds.metadata("train")
        rows = meta.to_dict("records") if hasattr(meta, "to_dict") else meta
        assert sorted((r["path"], r["label"]) for r in rows) == sorted((p, v[1]) for p, v in expected.items())

    again = spark_ingest.ingest_shards(spark, shards, cfg, PARTITIONS)
    assert sum(r.written for r in again) == 0 and sum(r.resumed for r in again) == len(expected), again


def test_spark_ingest_webdataset_command_line_from_a_shard_list(spark, wds, dataset, tmp_path):
    """--webdataset with a text file naming the shards (relative to its folder), as blobs without labels."""
    shard_dir, expected = wds
    listing = shard_dir / "shards.txt"
    listing.write_text("# the shards\n" + "".join(f"{p.name}\n" for p in sorted(shard_dir.glob("shard-*"))))
    assert spark_ingest.main(["--dataset", dataset, "--webdataset", str(listing), "--no-labels", "--kind", "blob",
                              "--job", "wds-cli", "--partitions", "4", "--hosts", HOSTS]) == 0
    got, seen = read_back(dataset, "train")
    assert set(got) == set(expected) and all(c == 1 for c in seen.values())
    assert [p for p in expected if got[p] != expected[p][0]] == []
    with cqlstream.Dataset(dataset, hosts=HOSTS) as ds:
        assert ds.label_kind == "none"


@pytest.mark.parametrize("members, message", [
    ([("a.jpg", b"x"), ("a.cls", b"0"), ("b.jpg", b"y"), ("b.cls", b"1"), ("a.txt", b"z")],
     "key 'a' comes back after other keys"),
    ([("a.jpg", b"x"), ("a.cls", b"0"), ("a.cls", b"1")], "sample 'a' has two 'cls' members"),
    ([("a.jpg", b"x")], "sample 'a' has no .cls member"),
    ([("a.jpg", b"x"), ("a.cls", b"three")], r"a\.cls is not a class index: b'three'"),
    ([("a.jpg", b"x"), ("a.cls", b"-1")], r"a\.cls is class -1: expected 0\.\.1048575"),
    ([("a.txt", b"x"), ("a.cls", b"0")], "sample 'a' has 0 members with extension jpg or jpeg or png, not one"),
    ([("a.jpg", b"x"), ("a.png", b"y"), ("a.cls", b"0")], "sample 'a' has 2 members with extension"),
])
def test_webdataset_shard_problems_name_the_shard_and_sample(tmp_path, members, message):
    shard = tmp_path / "bad.tar"
    write_tar(shard, members)
    cfg = spark_ingest.IngestConfig(dataset="x", split="train", job="j", classes=("0", "1"))
    with pytest.raises(ValueError, match=f"WebDataset shard bad.tar: .*{message}"):
        list(spark_ingest.shard_samples(cfg, [("bad.tar", str(shard))]))


def test_webdataset_damaged_tar_and_key_rules(tmp_path):
    shard = tmp_path / "cut.tar"
    write_tar(shard, [("a.jpg", b"x" * 5000), ("a.cls", b"0")])
    shard.write_bytes(shard.read_bytes()[:3000])  # cut inside a.jpg's data
    cfg = spark_ingest.IngestConfig(dataset="x", split="train", job="j", classes=("0",))
    with pytest.raises(ValueError, match="WebDataset shard cut.tar: cannot read it as a tar file"):
        list(spark_ingest.shard_samples(cfg, [("cut.tar", str(shard))]))
    assert spark_ingest.split_key("d/e/000017.seg.PNG") == ("d/e/000017", "seg.png")
    assert spark_ingest.split_key("d.x/noext") is None and spark_ingest.split_key(".hidden") is None
    # Members without a dot are skipped; keys in sub-folders keep their folder.
    ok = tmp_path / "ok.tar"
    write_tar(ok, [("README", b"r"), ("d/k.PNG", b"p"), ("d/k.cls", b" 0 \n")])
    assert list(spark_ingest.shard_samples(cfg, [("ok.tar", str(ok))])) == [
        {"path": "ok.tar/d/k.PNG", "label": "0", "data": b"p"}]
    with pytest.raises(SystemExit, match="no such shard file"):
        spark_ingest.list_shards(str(tmp_path / "missing.tar"))


@pytest.mark.parametrize("gz", [False, True])
def test_webdataset_damaged_shards_are_value_errors_never_crashes(tmp_path, gz):
    """A shard is outside input: 400 seeded mutations of a valid (plain or
    gzipped) shard — cut anywhere, or 1-8 bytes overwritten — each either
    reads as well-formed samples or raises ValueError naming the shard."""
    import gzip
    import random

    good = tmp_path / "good.tar"
    write_tar(good, [("a.jpg", b"x" * 700), ("a.cls", b"1"), ("b.png", b"y" * 50), ("b.cls", b"0")])
    clean = good.read_bytes()
    clean = gzip.compress(clean) if gz else clean
    cfg = spark_ingest.IngestConfig(dataset="x", split="train", job="j", classes=("0", "1"))
    rng = random.Random(5)
    shard = tmp_path / "m.tar"
    outcomes = collections.Counter()
    for _ in range(400):
        data = bytearray(clean)
        if rng.randrange(3) == 0:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        shard.write_bytes(bytes(data))
        try:
            for r in spark_ingest.shard_samples(cfg, [("m.tar", str(shard))]):
                assert isinstance(r["data"], bytes) and r["label"] in ("0", "1") and r["path"].startswith("m.tar/")
            outcomes["read"] += 1
        except ValueError as e:
            assert str(e).startswith("WebDataset shard m.tar: "), e
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and sum(outcomes.values()) == 400, outcomes
