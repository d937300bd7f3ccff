"""DFAnalyzer: analysis of DFTracer traces with Dask (paper Section IV).

``DFAnalyzer(pattern).summary()`` loads traces through the indexed C++ reader into a Dask
DataFrame and prints the paper's Figure 6 summary. ``setup_dask_cluster`` picks the cluster.
"""

from .analyzer import DFAnalyzer
from .cluster import setup_dask_cluster
from .summary import Summary

__all__ = ["DFAnalyzer", "Summary", "setup_dask_cluster"]
