"""Deployment: ONNX export of a segmentor and ONNX Runtime inference (whole and slide)."""
from .runtime import OnnxSession, slide_windows

__all__ = ['OnnxSession', 'slide_windows']
