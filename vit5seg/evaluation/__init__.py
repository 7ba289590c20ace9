"""Metrics no OpenMMLab library has, registered in mmdet's METRICS: video semantic segmentation (VSPW's mIoU
and VC) and video panoptic segmentation (VIPSeg's VPQ and STQ), as VidEoMT evaluates them."""
from .video_frames import VideoMetricError
from .video_panoptic import VideoPanopticMetric
from .video_semantic import VideoSemanticMetric

__all__ = ['VideoMetricError', 'VideoPanopticMetric', 'VideoSemanticMetric']
