"""``dftracer-index`` output: the rich table and ``--json`` when the index does not know the event
count yet (an index built from member headers alone: ``build_index(...)["events"] is None``)."""

import json
import os

from conftest import DATA

from dfanalyzer import reader, tools

LEGACY = os.path.join(DATA, "dftracer-legacy", "test.pfw.gz")


def test_unknown_event_count_is_null_and_dash(tmp_path, capsys, monkeypatch):
    real = reader.build_index

    def header_only(path, index_dir=None, force=False):
        return dict(real(path, index_dir, force=force), events=None)

    monkeypatch.setattr(reader, "build_index", header_only)
    args = [LEGACY, str(tmp_path / "absent.pfw.gz"), "--index-dir", str(tmp_path)]
    assert tools.index_main(args + ["--json"]) == 1  # the absent file
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["files"] == [
        {
            "file": LEGACY,
            "kind": "inflate",
            "lines": 1013,
            "events": None,
            "compressed_bytes": 8947,
            "uncompressed_bytes": 253630,
            "checkpoints": 1,
        }
    ]
    assert doc["total"] == {
        "lines": 1013,
        "events": None,
        "compressed_bytes": 8947,
        "uncompressed_bytes": 253630,
        "checkpoints": 1,
        "files": 1,
    }
    assert "absent.pfw.gz" in err
    assert tools.index_main([LEGACY, "--index-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[1:] == ["inflate", "1,013", "-", "8,947", "253,630", "1"]
    assert tools.index_main([LEGACY, "--index-dir", str(tmp_path), "--scan", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["events"] == 1012


def test_hostile_file_names_are_printed_escaped(tmp_path, capsys):
    """A trace's path is anybody's bytes: the table and the messages print its control
    characters as JSON escapes and its rich markup as text (``dfanalyzer.safetext``)."""
    import shutil

    name = "evil\x1b]0;owned\x07[bold red]y.pfw.gz"
    evil = tmp_path / name
    shutil.copy(LEGACY, evil)
    assert tools.index_main([str(evil), "--index-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\u001b]0;owned\\u0007[bold red]y.pfw.gz" in out.replace("\n", "")
    missing = str(tmp_path / "gone\x1b[2J.pfw.gz")
    assert tools.index_main([missing, "--index-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "gone\\u001b[2J.pfw.gz" in err
    assert tools.cat_main([missing]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "gone\\u001b[2J.pfw.gz" in err
