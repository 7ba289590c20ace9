"""mmseg's inference API for ViT-5 configs: ``init_model`` / ``inference_model``."""
from .inference import inference_model, init_model

__all__ = ['inference_model', 'init_model']
