"""Shared pytest fixtures (generic; parts may add their own below)."""

import os

import pytest

import dfanalyzer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
#: Directory that holds the dftracer/dfanalyzer packages this test run imports: the source tree
#: in a development build (PYTHONPATH=<repo>), site-packages after `pip install .`. Subprocesses
#: get it first on PYTHONPATH so they run the same build as the tests.
PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(dfanalyzer.__file__)))


def pythonpath_env(env=None):
    """A copy of ``env`` (default os.environ) with PKG_ROOT first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = PKG_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


@pytest.fixture(scope="session")
def dask_client():
    """One in-process Dask LocalCluster (2 workers x 1 thread) shared by the session (default client)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None, silence_logs=40
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()
