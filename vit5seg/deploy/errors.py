class ExportError(RuntimeError):
    """The ONNX exporter could not take the model; the message names the op and module."""
