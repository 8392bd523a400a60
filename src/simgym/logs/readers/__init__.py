"""Log readers: one module per format, each a generator ``read(path, report)`` that
yields :class:`~simgym.logs.model.LogRecord` one at a time and counts in the
:class:`~simgym.logs.model.ImportReport` what it read and skipped."""
