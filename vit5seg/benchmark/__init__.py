"""The benchmarks, measured in one process as ratios against peers: the backbone
(:mod:`.backbone`), whole segmentors (:mod:`.segmentor`), panoptic inference
(:mod:`.panoptic`), and the command line (:mod:`.cli`, ``tools/benchmark.py``)."""
from ..utils.amp import AMP_DTYPES
from .backbone import (TARGETS, backbone_timings, build_peers, fwd_bwd_step, missing_peers, peak_memory_mb,
                       reference_forward, timm_peers)
from .cli import main, results_table, run_benchmark
from .segmentor import (SEGMENTOR_TARGETS, SegmentorSteps, eomt_model_cfg, scene_labels, segmentor_peak_mb,
                        segmentor_timings, upernet_model_cfg)

__all__ = ['AMP_DTYPES', 'SEGMENTOR_TARGETS', 'TARGETS', 'SegmentorSteps', 'backbone_timings', 'build_peers',
           'eomt_model_cfg', 'fwd_bwd_step', 'main', 'missing_peers', 'peak_memory_mb', 'reference_forward',
           'results_table', 'run_benchmark', 'scene_labels', 'segmentor_peak_mb', 'segmentor_timings', 'timm_peers',
           'upernet_model_cfg']
