"""The package version: the one place it is written.

Read by scikit-build-core for the wheel metadata (pyproject.toml, regex provider), by CMake for
``project(VERSION)`` and the core's ``DFTRACER_VERSION`` (the ``version`` metadata record of
every trace, ``_dftracer.__version__``), and by ``dftracer.__version__``.
"""

__version__ = "0.1.0"
