"""The analyzer's call vocabulary is calls.def's (issue 20): derived through the reader binding,
checked here against the table parsed from the source text (tests/test_calls_table.py)."""

import re

from test_calls_table import calls

from dfanalyzer import _reader
from dfanalyzer.engine import vocabulary as V


def _event(sym):
    # the preload records _FORTIFY_SOURCE entry points under the plain name (posix.cpp, stdio.cpp)
    m = re.fullmatch(r"__(\w+?)(_chk|_2)", sym)
    return m.group(1) if m else sym


def test_binding_call_table_is_calls_def():
    rows = calls()
    assert [(c.interface, c.symbol, c.bytes) for c in V.CALLS] == [(r[0], r[1], r[4]) for r in rows]
    assert all(c.event == _event(c.symbol) for c in V.CALLS)
    assert V.TRACER_CATEGORY == _reader.TRACER_CATEGORY == "dftracer"


def test_families_follow_the_table():
    rows = [r for r in calls() if r[4] != "NO_EVENT"]
    byte = {_event(r[1]) for r in rows if r[4] in ("RET", "RET_TIMES_SIZE")}
    assert V.READ_NAMES | V.WRITE_NAMES <= byte
    assert {"preadv64", "preadv64v2", "fread", "read"} <= V.READ_NAMES
    assert {"pwritev64", "pwritev64v2", "fwrite", "write"} <= V.WRITE_NAMES
    assert not V.READ_NAMES & V.WRITE_NAMES
    # every positional call has an offset parameter; readv/read/fread have none
    with_offset = {_event(r[1]) for r in rows if re.search(r"\boff(64)?_t\b", r[3])}
    assert V.POSITIONAL_NAMES == byte & with_offset
    assert "readv" not in V.POSITIONAL_NAMES and "pread64" in V.POSITIONAL_NAMES
    assert V.OPEN_NAMES >= {"open", "open64", "openat", "creat", "fopen", "freopen64"}
    assert not V.OPEN_NAMES & {"opendir", "fdopendir", "fdopen"}
    assert V.LSEEK_NAMES == {"lseek", "lseek64"} and V.FSEEK_NAMES == {"fseek", "fseeko", "fseeko64"}
    # kernel copies (RET_COPY): data calls, read from fname and written to out_fname
    copies = {_event(r[1]) for r in rows if r[4] == "RET_COPY"}
    assert V.COPY_NAMES == copies == {"copy_file_range", "sendfile", "sendfile64", "splice"}
    assert not copies & (V.READ_NAMES | V.WRITE_NAMES | V.POSITIONAL_NAMES)
    assert V.DATA_NAMES == byte | copies | {"fsync", "fdatasync", "msync", "mmap", "mmap64", "munmap"}
    # the preload never records these: no family holds them
    assert not (V.READ_NAMES | V.WRITE_NAMES) & {"fgets", "getc", "fgetc", "fscanf", "fputs", "fputc", "fprintf"}


def test_byte_rule_matches_families():
    for n in V.READ_NAMES | V.WRITE_NAMES:
        assert _reader.byte_rule(n) in (1, 2), n
    assert _reader.byte_rule("fread") == _reader.byte_rule("fwrite") == 2
    assert _reader.byte_rule("open") == 0


def test_spanning_regions():
    assert V.spans_others("fetch.block") and V.spans_others("epoch") and V.spans_others("train")
    assert not V.spans_others("fetch.iter") and not V.spans_others("read")


def test_one_ai_vocabulary():
    """The insights' AI categories default to the vocabulary the epochs and layers views use."""
    from dfanalyzer import insights

    cats = insights.load_config()["categories"]
    assert cats == V.AI_CATEGORIES
    # fetch wait: the epochs view's (category, name) pairs, by name
    assert cats["fetch_wait_names"] == ["fetch.iter", "fetch", "_train.iter", "loop.iter"]
    assert set(cats["fetch_wait_names"]) == {n for _, n in V.FETCH_EVENTS}
    # app I/O: the app_io layer of layers()
    assert set(cats["app_io"]) == {c for c, layer in V.DEFAULT_LAYERS.items() if layer == "app_io"}
    assert set(cats["app_io"]) == {"reader", "data_loader", "data", "dataloader"}
    assert {n for _, n in V.EPOCH_EVENTS} == set(cats["epoch_names"])
    assert {n for _, n in V.TRAIN_EVENTS} == set(cats["epoch_fallback_names"])
    # a user config still overrides one key and keeps the others
    user = insights.load_config({"categories": {"fetch_wait_names": ["next_batch"]}})["categories"]
    assert user["fetch_wait_names"] == ["next_batch"] and user["app_io"] == cats["app_io"]
    assert V.AI_CATEGORIES["fetch_wait_names"] == cats["fetch_wait_names"]  # not mutated
