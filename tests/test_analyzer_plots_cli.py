"""Timeline plots (paper Fig. 8a/8b) and CLI argument handling."""

import os

import numpy as np
import pandas as pd
import pytest
from test_analyzer_pipeline import _touch, fake_reader  # noqa: F401  (fixture)

from dfanalyzer import DFAnalyzer, cli, plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_timeline_partial_exact():
    df = pd.DataFrame(
        {
            "cat": pd.Categorical(["POSIX", "POSIX", "compute", "STDIO", "POSIX"]),
            "ph": pd.Categorical(["X"] * 5),
            "ts": np.array([0, 10, 20, 50, 99], dtype=np.int64),
            "dur": np.array([5, 5, 30, 7, 1], dtype=np.int64),
            "size": pd.array([100, None, 7, 300, 50], dtype="Int64"),
        }
    )
    df["te"] = df["ts"] + df["dur"]  # a core column of the events frame
    h = plots.timeline_partial(df, 0, 100, 4, ("POSIX", "STDIO"))
    assert h["bytes"].tolist() == [100, 0, 300, 50]
    assert h["dur"].tolist() == [10, 0, 7, 1]
    assert h["n_sized"].tolist() == [1, 0, 1, 1]
    assert h["xfer_max"].tolist() == [100, 0, 300, 50]
    both = plots.combine_timelines(h, h)
    assert both["bytes"].tolist() == [200, 0, 600, 100] and both["xfer_max"].tolist() == [100, 0, 300, 50]
    # a call crossing bin edges: its bytes and time split by overlap, its size counted at its start
    df.loc[0, ["dur", "te"]] = [50, 50]
    h = plots.timeline_partial(df, 0, 100, 4, ("POSIX", "STDIO"))
    assert h["bytes"].tolist() == [50, 50, 300, 50] and h["dur"].tolist() == [30, 25, 7, 1]
    assert h["xfer_max"].tolist() == [100, 0, 300, 50]


def test_plot_timeline_writes_pngs(tmp_path, fake_reader, dask_client):  # noqa: F811
    an = DFAnalyzer(_touch(tmp_path, "a1.pfw.gz"), client=dask_client, small_file_mb=0)
    tl = plots.timeline(an, bins=20)
    full = an.events.compute(scheduler=dask_client)
    io = full[full["cat"].isin(["POSIX", "STDIO"]) & (full["ph"] == "X")]
    assert len(tl) == 20 and int(tl["bytes"].sum()) == int(io["size"].sum())
    assert tl["io_time"].sum() == pytest.approx(io["dur"].sum() / 1e6)
    paths = an.plot_timeline(str(tmp_path / "plots"), bins=20)
    assert [os.path.basename(p) for p in paths] == ["io_bandwidth_time.png", "transfer_size.png"]
    for p in paths:
        data = open(p, "rb").read()
        assert data[:8] == PNG_MAGIC and len(data) > 5000


def test_cli_parser():
    a = cli.build_parser().parse_args(
        [
            "summary",
            "x*.gz",
            "y",
            "--json",
            "--workers",
            "3",
            "--index-dir",
            "/i",
            "--plot",
            "/p",
            "--io-cats",
            "POSIX, STDIO,MPI",
        ]
    )
    assert a.patterns == ["x*.gz", "y"] and a.json and a.workers == 3 and a.index_dir == "/i"
    assert a.plot == "/p" and a.io_cats == ("POSIX", "STDIO", "MPI") and a.scheduler is None
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["summary", "x", "--scheduler", "a:1", "--scheduler-file", "f"])
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["summary"])


def test_cli_no_match_is_clear_error(tmp_path, capsys):
    pat = str(tmp_path / "none-*.pfw.gz")
    assert cli.main(["summary", pat]) == 2
    err = capsys.readouterr().err
    assert "no trace files match pattern" in err and "none-*.pfw.gz" in err


def test_cli_bad_workers(capsys):
    assert cli.main(["summary", "x", "--workers", "0"]) == 2
    assert "--workers" in capsys.readouterr().err
