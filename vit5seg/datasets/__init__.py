from .check import check_ade20k, check_config, check_split, format_report
from .eomt_augment import EoMTColorJitter, ScaleJitterCrop
from .layouts import CUSTOM_CLASSES, DATA_ROOTS, DATASETS, make_synthetic_data
from .synthetic import make_synthetic_ade20k
from .transforms import CheckedLoading, CheckSegSample, SampleError, skipped_samples
from .validation import DatasetError, check_data, check_dataset_config

import importlib.util  # noqa: E402

if importlib.util.find_spec('mmdet') is not None:  # panoptic configs (mmdet: the [mask2former] extra)
    from .coco_panoptic import EoMTCocoPanopticDataset  # noqa: F401  (registers it in mmdet)
    from .transforms import check_panoptic_loading
    check_panoptic_loading()

__all__ = ['CUSTOM_CLASSES', 'DATASETS', 'DATA_ROOTS', 'CheckSegSample', 'CheckedLoading', 'DatasetError',
           'EoMTColorJitter', 'SampleError', 'ScaleJitterCrop', 'check_ade20k', 'check_config', 'check_data',
           'check_dataset_config', 'check_split', 'format_report', 'make_synthetic_ade20k', 'make_synthetic_data',
           'skipped_samples']
