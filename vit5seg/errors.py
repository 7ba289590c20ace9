"""The base of every error a tool reports as one line (``error: ...``, exit status 1)
rather than a traceback: bad data, a checkpoint or download that does not fit, a
non-finite loss, an op the exporter cannot take. Each is defined where it is raised, as a
subclass of this and of the builtin error it stands for, so ``engine.launch.run_tool``
needs no import from the layers above it to know them."""


class ToolError(Exception):
    """An expected failure whose message says what went wrong and where."""
