from .check import check_ade20k, format_report
from .synthetic import make_synthetic_ade20k
from .transforms import CheckedLoading, CheckSegSample, SampleError, skipped_samples
from .validation import DatasetError, check_data, check_dataset_config

__all__ = ['CheckSegSample', 'CheckedLoading', 'DatasetError', 'SampleError', 'check_ade20k', 'check_data',
           'check_dataset_config', 'format_report', 'make_synthetic_ade20k', 'skipped_samples']
