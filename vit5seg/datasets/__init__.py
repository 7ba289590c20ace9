from .check import check_ade20k, format_report
from .synthetic import make_synthetic_ade20k

__all__ = ['check_ade20k', 'format_report', 'make_synthetic_ade20k']
