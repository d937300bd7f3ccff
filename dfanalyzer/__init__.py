"""DFAnalyzer: analysis of DFTracer traces with Dask (paper Section IV).

``DFAnalyzer(pattern).summary()`` loads traces through the indexed C++ reader into a Dask
DataFrame and prints the paper's Figure 6 summary. ``setup_dask_cluster`` picks the cluster.
"""

__all__ = ["DFAnalyzer", "Summary", "setup_dask_cluster"]
_WHERE = {"DFAnalyzer": "analyzer", "Summary": "summary", "setup_dask_cluster": "cluster"}


def __getattr__(name: str):
    # imported on first use: the command-line tools (dftracer-index) need neither pandas nor Dask
    if name in _WHERE:
        import importlib

        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
