#!/usr/bin/env python3
"""Writes a Triton model repository that serves images from Cassandra through
cqlstream's DALI serving operators, and classifies them (docs/triton.md).

    model_repository/
      cqlstream_images/1/model.dali           interactive: keys -> decoded, resized, normalized images
      cqlstream_images/config.pbtxt
      cqlstream_images_stream/1/model.dali    decoupled: one long key list -> a stream of mini-batches
      cqlstream_images_stream/config.pbtxt
      classifier/1/model.pt                   a tiny TorchScript CNN (random weights, seeded)
      classifier/config.pbtxt
      cqlstream_classify/config.pbtxt         ensemble: cqlstream_images -> classifier
      cqlstream_classify_stream/config.pbtxt  ensemble: cqlstream_images_stream -> classifier
      libcqlstream_dali.so                    the plugin (copied; it must match the server's DALI)

Run with the plugin built against the DALI of the Triton container
(-DCQLSTREAM_DALI_VERSION=<its DALI>), then
    tritonserver --model-repository $PWD/model_repository
and examples/triton/client.py. Without a server, client.py --local drives the
same serialized pipelines through DALI's input feeding (what the tests do).

The connection is serialized into the pipelines (--hosts, --keyspace); the
password only ever comes from CQLSTREAM_PASSWORD_FILE / CQLSTREAM_PASSWORD in
tritonserver's environment.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch
from torch import nn

import cqlstream.dali as cd
import cqlstream.serving as cs
from nvidia.dali import fn, pipeline_def, types

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def preprocess(jpegs, size: int, gpu: bool):
    images = fn.decoders.image(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB)
    images = fn.resize(images, resize_x=size, resize_y=size)
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN, std=STD)


def serving_pipelines(dataset: str, *, max_batch: int, size: int, gpu: bool, mini_batch: int, conn: dict):
    """The two serialized DALI pipelines: (interactive, decoupled)."""
    device_id = 0 if gpu else None

    @pipeline_def(batch_size=max_batch, num_threads=4, device_id=device_id, prefetch_queue_depth=1,
                  exec_dynamic=True)
    def interactive():
        jpegs, labels = cs.interactive_reader(dataset, name="KEYS", prefetch_requests=8, **conn)
        return preprocess(jpegs, size, gpu), labels

    @pipeline_def(batch_size=max_batch, num_threads=4, device_id=device_id, prefetch_queue_depth=1,
                  exec_dynamic=True)
    def decoupled():
        jpegs, labels, keys = cs.decoupled_reader(dataset, name="KEYS", mini_batch_size=mini_batch,
                                                  prefetch_requests=4, output_keys=True, **conn)
        return preprocess(jpegs, size, gpu), labels, keys

    return interactive().serialize(), decoupled().serialize()


class TinyNet(nn.Module):
    """Stands in for a real classifier: conv -> pool -> linear (random weights, seed 0)."""

    def __init__(self, classes: int):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.head = nn.Linear(8 * 4 * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.head(torch.flatten(self.features(x), 1)), dim=1)


def classifier(classes: int) -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    return torch.jit.script(TinyNet(classes).eval())


DALI_CONFIG = """name: "{name}"
backend: "dali"
max_batch_size: {max_batch}
input [ {{ name: "KEYS", data_type: TYPE_INT64, dims: [ {in_dims} ]{reshape} }} ]
output [
  {{ name: "DALI_OUTPUT_0", data_type: TYPE_FP32, dims: [ 3, {size}, {size} ] }},
  {{ name: "DALI_OUTPUT_1", data_type: TYPE_INT32, dims: [ 1 ] }}{extra_output}
]
{policy}parameters: [ {{ key: "plugin_libs", value: {{ string_value: "{plugin}" }} }} ]
"""

CLASSIFIER_CONFIG = """name: "classifier"
platform: "pytorch_libtorch"
max_batch_size: {max_batch}
input [ {{ name: "INPUT__0", data_type: TYPE_FP32, dims: [ 3, {size}, {size} ] }} ]
output [ {{ name: "OUTPUT__0", data_type: TYPE_FP32, dims: [ {classes} ] }} ]
"""

ENSEMBLE_CONFIG = """name: "{name}"
platform: "ensemble"
max_batch_size: {max_batch}
input [ {{ name: "KEYS", data_type: TYPE_INT64, dims: [ {in_dims} ] }} ]
output [
  {{ name: "SCORES", data_type: TYPE_FP32, dims: [ {classes} ] }},
  {{ name: "LABELS", data_type: TYPE_INT32, dims: [ 1 ] }}
]
ensemble_scheduling {{
  step [
    {{
      model_name: "{dali}"
      model_version: -1
      input_map {{ key: "KEYS" value: "KEYS" }}
      output_map {{ key: "DALI_OUTPUT_0" value: "images" }}
      output_map {{ key: "DALI_OUTPUT_1" value: "LABELS" }}
    }},
    {{
      model_name: "classifier"
      model_version: -1
      input_map {{ key: "INPUT__0" value: "images" }}
      output_map {{ key: "OUTPUT__0" value: "SCORES" }}
    }}
  ]
}}
"""


def write_repository(out: Path, dataset: str, *, max_batch: int, size: int, gpu: bool, mini_batch: int,
                     classes: int, plugin_in_repo: str, conn: dict) -> None:
    inter, dec = serving_pipelines(dataset, max_batch=max_batch, size=size, gpu=gpu, mini_batch=mini_batch,
                                   conn=conn)
    plugin = cd.plugin_path()
    for name, blob in (("cqlstream_images", inter), ("cqlstream_images_stream", dec)):
        (out / name / "1").mkdir(parents=True, exist_ok=True)
        (out / name / "1" / "model.dali").write_bytes(blob)
    # Interactive: Triton batches requests (max_batch_size > 0, one key per sample).
    (out / "cqlstream_images" / "config.pbtxt").write_text(DALI_CONFIG.format(
        name="cqlstream_images", max_batch=max_batch, in_dims="1", reshape=", reshape: { shape: [ ] }",
        size=size, extra_output="",
        policy="dynamic_batching { }\n", plugin=plugin_in_repo))
    # Decoupled: one request is one long key list (max_batch_size 0, dims [-1]); every response
    # is one mini-batch, with the keys it holds.
    (out / "cqlstream_images_stream" / "config.pbtxt").write_text(DALI_CONFIG.format(
        name="cqlstream_images_stream", max_batch=0, in_dims="-1", reshape="", size=f"{size}",
        extra_output=',\n  { name: "DALI_OUTPUT_2", data_type: TYPE_INT64, dims: [ 1 ] }',
        policy="model_transaction_policy { decoupled: True }\n", plugin=plugin_in_repo))
    (out / "classifier" / "1").mkdir(parents=True, exist_ok=True)
    classifier(classes).save(str(out / "classifier" / "1" / "model.pt"))
    (out / "classifier" / "config.pbtxt").write_text(CLASSIFIER_CONFIG.format(max_batch=max_batch, size=size,
                                                                                classes=classes))
    for name, dali, mb, dims in (("cqlstream_classify", "cqlstream_images", max_batch, "1"),
                                 ("cqlstream_classify_stream", "cqlstream_images_stream", 0, "-1")):
        (out / name).mkdir(parents=True, exist_ok=True)
        cfg = ENSEMBLE_CONFIG.format(name=name, max_batch=mb, in_dims=dims, classes=classes, dali=dali)
        if dali.endswith("_stream"):
            cfg = cfg.replace('platform: "ensemble"\n', 'platform: "ensemble"\nmodel_transaction_policy { decoupled: True }\n')
        (out / name / "config.pbtxt").write_text(cfg)
    if plugin:
        shutil.copy2(plugin, out / "libcqlstream_dali.so")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--out", type=Path, default=Path("model_repository"))
    ap.add_argument("--max-batch", type=int, default=64)
    ap.add_argument("--mini-batch", type=int, default=16, help="samples per streamed response (decoupled)")
    ap.add_argument("--size", type=int, default=64, help="images are resized to size x size")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--gpu", action="store_true", help="decode on the GPU (mixed); needs a GPU to serialize")
    ap.add_argument("--plugin-path", default="/models/libcqlstream_dali.so",
                    help="where tritonserver finds the plugin (config.pbtxt plugin_libs)")
    ap.add_argument("--hosts", default=None)
    ap.add_argument("--keyspace", default=None)
    a = ap.parse_args(argv)
    cd.load_plugin(required=True)
    conn = {k: v for k, v in (("hosts", a.hosts), ("keyspace", a.keyspace)) if v}
    write_repository(a.out, a.dataset, max_batch=a.max_batch, size=a.size, gpu=a.gpu, mini_batch=a.mini_batch,
                     classes=a.classes, plugin_in_repo=a.plugin_path, conn=conn)
    print(f"model repository written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
