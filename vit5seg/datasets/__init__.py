from .checks import (CheckedLoading, CheckSegSample, DatasetError, SampleError, check_ade20k, check_config, check_data,
                     check_dataset_config, check_split, format_report, skipped_samples)
from .layouts import CUSTOM_CLASSES, DATA_ROOTS, DATASETS, make_synthetic_data
from .synthetic import make_synthetic_ade20k
from .transforms import DINOv3PhotoMetricDistortion, EoMTColorJitter, ScaleJitterCrop

import importlib.util  # noqa: E402

if importlib.util.find_spec('mmdet') is not None:  # panoptic configs (mmdet: the [mask2former] extra)
    from .checks import check_panoptic_loading
    from .coco_panoptic import EoMTCocoPanopticDataset  # noqa: F401  (registers it in mmdet)
    from .vipseg import LoadVideoPanopticAnnotations, VIPSegDataset  # noqa: F401  (video panoptic, in mmdet)
    from .vspw import PackVideoSegInputs, VSPWDataset  # noqa: F401  (video semantic segmentation, in mmdet)
    check_panoptic_loading()

__all__ = ['CUSTOM_CLASSES', 'DATASETS', 'DATA_ROOTS', 'CheckSegSample', 'CheckedLoading', 'DINOv3PhotoMetricDistortion',
           'DatasetError', 'EoMTColorJitter', 'SampleError', 'ScaleJitterCrop', 'check_ade20k', 'check_config', 'check_data',
           'check_dataset_config', 'check_split', 'format_report', 'make_synthetic_ade20k', 'make_synthetic_data',
           'skipped_samples']
