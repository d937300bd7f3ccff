"""The analysis engine: the one definition of every building block the analyses share.

* :mod:`.vocabulary` - the call families (from ``src/format/calls.def`` through the reader
  binding), the tracer category, the category defaults and the AI vocabulary;
* :mod:`.events` - what an event is (``ph`` ``X`` or ``A``, not the tracer's category) and its
  weight (``dft_cnt`` calls per aggregated record), over one columns protocol;
* :mod:`.intervals` - interval unions, measures, set operations, exact histograms;
* :mod:`.access` - the file-position model (where each read/write lands, random vs sequential);
* :mod:`.timebins` - the time binning of every per-window metric;
* :mod:`.reduce` - the mergeable-partial protocol and the fan-in-8 tree reduction.

``summary``, ``views``, ``insights``, ``plots`` and ``report`` are metrics over these modules
(docs/design.md, "Analysis engine").
"""
