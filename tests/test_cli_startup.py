"""The summary command's start-up costs (issue 22, deliver 1: the whole ``--scheduler`` command;
docs/perf/i26-client.md), without changing what the command prints or returns.

* In the ``dfanalyzer`` process itself (``cli.run``: ``python -m dfanalyzer.cli``, the console
  script) the cyclic garbage collector is paused for the start-up (imports, connecting,
  indexing, planning) and what it made is frozen before the summary runs: stdout, stderr and
  the exit status are those of ``cli.main`` called with the collector untouched, for the
  threaded command, the ``--scheduler`` command and a failing command; a caller of ``main``
  keeps its collector as it was.
* ``cluster._import_distributed`` (Dask's YAML parsed by libyaml during the import) gives the
  same Dask configuration as a plain ``import distributed``, a user's config file included, and
  leaves ``yaml.safe_load`` as it was; without libyaml it is a plain import.
"""

import gc
import json
import os
import shutil
import subprocess
import sys

from conftest import DATA, python_json, pythonpath_env

CM1 = os.path.join(DATA, "dftracer-v1.0.5-cm1")

# main() in a process whose collector is left alone (what a caller of main() gets)
_MAIN = "import sys\nfrom dfanalyzer.cli import main\nsys.exit(main(sys.argv[1:]))\n"

# run() (the console script), recording the collector's state where the start-up ends
_RUN_PROBE = (
    "import gc, json, sys\n"
    "import dfanalyzer.cli as cli\n"
    "seen = {}\n"
    "end = cli._StartUpGc.end\n"
    "def probe(self):\n"
    "    if self._on:\n"
    "        seen['enabled_before'] = gc.isenabled()\n"
    "        seen['frozen_before'] = gc.get_freeze_count()\n"
    "    end(self)\n"
    "    seen['enabled_after'] = gc.isenabled()\n"
    "    seen['frozen_after'] = gc.get_freeze_count()\n"
    "    with open(%r, 'w') as f:\n"
    "        json.dump(seen, f)\n"
    "cli._StartUpGc.end = probe\n"
    "sys.argv = ['dfanalyzer'] + sys.argv[1:]\n"
    "cli.run()\n"
)


def _two_ways(tmp_path, *argv, env=None):
    """(main's result, run's result, run's collector probe) of ``dfanalyzer summary *argv``."""
    probe = tmp_path / "probe.json"
    if probe.exists():
        probe.unlink()
    cmd = ["summary", *argv, "--no-progress"]
    kw = dict(capture_output=True, text=True, env=pythonpath_env(env), timeout=180, cwd=str(tmp_path))
    plain = subprocess.run([sys.executable, "-c", _MAIN, *cmd], **kw)
    frozen = subprocess.run([sys.executable, "-c", _RUN_PROBE % str(probe), *cmd], **kw)
    seen = json.loads(probe.read_text()) if probe.exists() else None
    return plain, frozen, seen


def _same(plain, frozen) -> None:
    assert (frozen.returncode, frozen.stdout, frozen.stderr) == (plain.returncode, plain.stdout, plain.stderr)


def test_frozen_start_up_prints_and_returns_the_same(tmp_path):
    from distributed import Client, LocalCluster

    d = tmp_path / "cm1"
    shutil.copytree(CM1, d)
    common = (str(d), "--json", "--small-file-mb", "0")
    plain, frozen, seen = _two_ways(tmp_path, *common, "--workers", "2")
    _same(plain, frozen)
    assert plain.returncode == 0 and json.loads(plain.stdout)["events"] > 0, plain.stderr[-2000:]
    # the start-up ran with the collector off; what it made is frozen, the collector back on
    assert seen["enabled_before"] is False and seen["enabled_after"] is True, seen
    assert seen["frozen_before"] == 0 and seen["frozen_after"] > 10_000, seen
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=None
    ) as lc:
        with Client(lc, set_as_default=False):
            cp, cf, cseen = _two_ways(tmp_path, *common, "--scheduler", lc.scheduler_address)
    _same(cp, cf)
    assert cp.returncode == 0 and json.loads(cp.stdout) == json.loads(plain.stdout), cp.stderr[-2000:]
    assert cseen["enabled_before"] is False and cseen["enabled_after"] is True
    assert cseen["frozen_after"] > seen["frozen_after"]  # (distributed's modules too)
    # errors are reported as before: a missing input (before the start-up) and a scheduler
    # nobody listens on (during it: the collector is restored on the way out)
    ep, ef, _ = _two_ways(tmp_path, str(tmp_path / "missing*.pfw.gz"), "--json", "--workers", "2")
    _same(ep, ef)
    assert ep.returncode == 2 and "missing" in ep.stderr
    quick = dict(os.environ, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s")
    up, uf, _ = _two_ways(tmp_path, *common, "--scheduler", "tcp://127.0.0.1:9", env=quick)
    _same(up, uf)
    assert up.returncode == 1 and "cannot start or reach the Dask cluster" in up.stderr and up.stdout == ""


def test_a_callers_collector_is_left_alone(monkeypatch):
    import dfanalyzer.cli as cli

    monkeypatch.setattr(cli, "_FREEZE_START_UP", False)
    frozen = gc.get_freeze_count()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            p = cli._StartUpGc()
            assert gc.isenabled() is enabled
            p.end()
            p.end()
            assert gc.isenabled() is enabled and gc.get_freeze_count() == frozen
        finally:
            gc.enable()


_CONFIG = (
    "import json, sys\n"
    "if sys.argv[1] == 'nolibyaml':\n"
    "    import yaml\n"
    "    del yaml.CSafeLoader\n"
    "plain_load = __import__('yaml').safe_load\n"
    "if sys.argv[1] == 'plain':\n"
    "    import distributed\n"
    "else:\n"
    "    from dfanalyzer.cluster import _import_distributed\n"
    "    _import_distributed()\n"
    "import dask, yaml\n"
    "print(json.dumps({'config': dask.config.config, 'restored': yaml.safe_load is plain_load},\n"
    "                 sort_keys=True, default=repr))\n"
)


def test_import_distributed_reads_the_same_config(tmp_path):
    # a user's config file beside the packages' own: anchors, nesting, lists, quoted and
    # unquoted scalars, a key distributed reads
    cfg = tmp_path / "dask"
    cfg.mkdir()
    (cfg / "user.yaml").write_text(
        "base: &b\n  retries: 3\n  names: [a, 'b c', 2.5, null, yes]\n"
        "dfa-test:\n  <<: *b\n  when: 2026-11-27\n  text: |\n    two\n    lines\n"
        "distributed:\n  comm:\n    timeouts:\n      connect: 45s\n"
    )
    env = pythonpath_env()
    env["DASK_CONFIG"] = str(cfg)
    got = {how: python_json(_CONFIG, how, env=env, cwd=tmp_path) for how in ("plain", "libyaml", "nolibyaml")}
    assert got["plain"]["config"]["dfa-test"]["names"] == ["a", "b c", 2.5, None, True]
    assert got["plain"]["config"]["distributed"]["comm"]["timeouts"]["connect"] == "45s"
    assert got["libyaml"]["config"] == got["plain"]["config"]
    assert got["nolibyaml"]["config"] == got["plain"]["config"]
    assert got["libyaml"]["restored"] and got["nolibyaml"]["restored"]
