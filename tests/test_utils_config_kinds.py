"""One answer to "which task is this config?" (vit5seg.utils.config_kinds.task_of), held to what the
shipped configs' names say, and one test-pipeline rule for photos: every tool asks these."""
import pytest
from mmengine.config import Config

from conftest import REPO
from vit5seg.utils.config_kinds import photo_pipeline, task_of

# a config of each kind, by what its file name says
NAMED = {
    'vit5_upernet_ade20k.py': 'semantic', 'linear/dinov2-small_linear_ade20k.py': 'semantic',
    'eomt/dinov2-large_eomt_cityscapes-1024.py': 'semantic', 'pmt/vit5-small_pmt_ade20k-512.py': 'semantic',
    'eomt/dinov2-large_eomt_coco-panoptic-640.py': 'panoptic', 'eomt/dinov2-large_eomt_ade20k-panoptic-640.py':
    'panoptic', 'pmt/dinov3-large_pmt_coco-panoptic-640.py': 'panoptic', 'tiny/vit5_eomt_coco_panoptic_synthetic.py':
    'panoptic', 'eomt/dinov3-large_eomt_coco-instance-640.py': 'instance', 'pmt/dinov3-large_pmt_coco-instance-1280.py':
    'instance', 'tiny/vit5_eomt_coco_instance_synthetic.py': 'instance', 'pmt/dinov3-large_pmt_all-tasks.py':
    'all-tasks',
}


@pytest.mark.parametrize('config', sorted(NAMED))
def test_the_task_of_a_shipped_config_is_the_one_its_name_gives(config):
    assert task_of(Config.fromfile(str(REPO / 'configs' / config))) == NAMED[config]


def test_an_mmdet_config_is_panoptic_unless_its_fusion_head_turns_panoptic_off():
    """mmdet's MaskFormerFusionHead defaults to panoptic_on=True: a test_cfg without the key is panoptic."""
    cfg = Config(dict(default_scope='mmdet', model=dict(type='EoMT', test_cfg=dict(instance_on=True))))
    assert task_of(cfg) == 'panoptic'
    cfg.model.test_cfg.panoptic_on = False
    assert task_of(cfg) == 'instance'


def test_a_photo_pipeline_loads_no_annotation_of_either_library():
    pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(640, 640)),
                dict(type='LoadAnnotations'), dict(type='LoadPanopticAnnotations'), dict(type='PackDetInputs')]
    assert [s['type'] for s in photo_pipeline(pipeline)] == ['LoadImageFromFile', 'Resize', 'PackDetInputs']


def test_a_config_whose_model_takes_clips_is_video_instance():
    """mmdet's own Mask2Former-VIS config (in its package's .mim configs) and ours alike."""
    from pathlib import Path

    import mmdet
    from test_models_video import video_config
    theirs = Path(mmdet.__file__).parent / '.mim' / 'configs' / 'mask2former_vis' / \
        'mask2former_r50_8xb2-8e_youtubevis2019.py'
    assert task_of(Config.fromfile(str(theirs))) == 'video-instance'
    assert task_of(video_config()) == 'video-instance'
