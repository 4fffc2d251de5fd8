"""The readers of a received run directory read nothing outside it (a ``meta.json`` symlink to a private
file is refused, not parsed into ``info``)."""

from __future__ import annotations

import pytest

from attnflow.experiments.files import UnsafePathError
from attnflow.experiments.store import read_meta, run_info
from attnflow.experiments.training_run import read_training_run


@pytest.mark.parametrize("reader", [read_meta, run_info, read_training_run])
def test_a_meta_json_symlink_out_is_refused(tmp_path, reader):
    private = tmp_path / "private.json"
    private.write_text('{"status": "done", "name": "SECRET"}')
    d = tmp_path / "run"
    d.mkdir()
    (d / "meta.json").symlink_to(private)
    with pytest.raises(UnsafePathError, match=r"meta.json.*resolves to .*private\.json, outside"):
        reader(d)
