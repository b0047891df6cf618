"""cqlstream.dali.reader() without the native plugin is loud: a FallbackWarning
naming why, or an error with CQLSTREAM_DALI_FALLBACK=error. Needs DALI (any
version: the plugin is made unavailable on purpose) but no server: the
fallback's loader opens lazily, on the first batch."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("nvidia.dali")

from nvidia.dali.pipeline import Pipeline  # noqa: E402

import cqlstream.dali as cd  # noqa: E402

REASON = "libcqlstream_dali.so not found (a test made it unavailable)"


@pytest.fixture
def no_plugin(monkeypatch):
    def fail(path=None, *, required=True):
        monkeypatch.setattr(cd, "_error", REASON)
        if required:
            raise cd.PluginNotLoadedError(REASON)
        return False

    monkeypatch.setattr(cd, "_loaded_path", None)
    monkeypatch.setattr(cd, "load_plugin", fail)
    monkeypatch.delenv(cd.FALLBACK_ENV, raising=False)
    return monkeypatch


def pipeline() -> Pipeline:
    return Pipeline(batch_size=2, num_threads=1, device_id=None)


def test_fallback_warns_naming_why(no_plugin):
    with pipeline():
        with pytest.warns(cd.FallbackWarning) as rec:
            out = cd.reader("some_dataset", hosts="127.0.0.1")
    assert len(out) == 2
    msg = str(rec[0].message)
    assert REASON in msg and "external_source fallback" in msg and "CQLSTREAM_DALI_FALLBACK=error" in msg


def test_fallback_error_mode_raises(no_plugin):
    no_plugin.setenv(cd.FALLBACK_ENV, "error")
    with pipeline():
        with pytest.raises(cd.PluginNotLoadedError, match="libcqlstream_dali.so not found"):
            cd.reader("some_dataset")


def test_fallback_env_value_is_checked(no_plugin):
    no_plugin.setenv(cd.FALLBACK_ENV, "quiet")
    with pipeline():
        with pytest.raises(ValueError, match="CQLSTREAM_DALI_FALLBACK must be 'warn' or 'error'"):
            cd.reader("some_dataset")


def test_asking_for_the_fallback_is_silent(no_plugin):
    no_plugin.setenv(cd.FALLBACK_ENV, "error")
    with pipeline():
        with warnings.catch_warnings():
            warnings.simplefilter("error", cd.FallbackWarning)
            out = cd.reader("some_dataset", use_plugin=False)
    assert len(out) == 2
