"""``pandas`` imported on first use.

The client of a distributed summary (``dfanalyzer summary --scheduler``) only plans batches,
gathers the workers' partials (NumPy arrays and Python objects) and folds them: it never needs
pandas, whose import (with pyarrow) costs about 0.5 s of CPU, as much as importing
``distributed``. The modules on that path (analyzer, summary, sanity, engine) therefore bind
``pd`` to this proxy, which imports pandas the first time one of its attributes is used.
``sys.modules`` is left alone until then (other libraries test ``"pandas" in sys.modules``).
"""

from __future__ import annotations

import importlib
import types


class LazyModule(types.ModuleType):
    """A stand-in for the module ``name``: the first attribute access imports it."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__dict__["_lazy_module"] = None

    def __getattr__(self, attr: str):
        mod = self.__dict__["_lazy_module"]
        if mod is None:
            mod = self.__dict__["_lazy_module"] = importlib.import_module(self.__name__)
        return getattr(mod, attr)

    def __reduce__(self):  # (pickled with a function's globals: the real module on the other side)
        return importlib.import_module, (self.__name__,)


pandas = LazyModule("pandas")
