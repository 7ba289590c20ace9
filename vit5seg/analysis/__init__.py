from .complexity import count_gmacs, model_complexity

__all__ = ['count_gmacs', 'model_complexity']
