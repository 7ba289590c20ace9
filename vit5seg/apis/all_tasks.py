"""One frozen encoder, one forward pass, every task: the semantic, panoptic and instance PMT models of one
encoder (each with its own checkpoint) share its weights in memory and its pass per image; each decoder
reads the taps it names (``MaskDecoder.tap_indices``) from that pass, and its model predicts from them as alone
(``predict_encoded``).

mmseg and mmdet run one model per task, and PMT's code one task per run; a frozen encoder makes the sharing
exact: its tensors are the same in every task's checkpoint (checked when the models are joined), and so are
its outputs. Every head reads one input: the ``input_task`` model's test pipeline and data preprocessor
(the COCO models': the long side at 640, padded to 640 x 640); a semantic head predicts it whole.

An all-tasks config (``configs/pmt/dinov3-large_pmt_all-tasks.py``)::

    tasks = dict(semantic=dict(config='pmt/...ade20k-512.py', checkpoint='FILE.pth'), panoptic=..., instance=...)
    input_task = 'panoptic'

``config`` is under configs/ (or a path), ``checkpoint`` a file name in the checkpoint folder given to
:func:`init_all_tasks` (``tools/infer.py CONFIG FOLDER ...``); ``cfg_options`` of a task are merged into its config.
"""
import copy
from pathlib import Path
from typing import Dict, Optional, Union

import numpy as np
import torch
from mmengine.config import Config

from ..errors import ToolError
from ..paths import config_path
from ..utils.config_kinds import is_all_tasks_config, photo_pipeline, task_of

__all__ = ['AllTasksError', 'AllTasksModel', 'init_all_tasks', 'is_all_tasks_config']


class AllTasksError(ToolError):
    """Task models that cannot share one encoder pass."""


def _task_config(entry: dict) -> Config:
    source = entry['config']
    if isinstance(source, Config):
        cfg = copy.deepcopy(source)
    else:
        path = Path(source)
        cfg = Config.fromfile(str(path if path.is_file() else config_path(str(source))))
    if entry.get('cfg_options'):
        cfg.merge_from_dict(dict(entry['cfg_options']))
    return cfg


class AllTasksModel:
    """Task models (name -> an mmseg or mmdet PMT model, frozen encoder) joined on one encoder.

    ``predict(image)`` (a BGR array): ``{task: its result}``, an mmseg ``SegDataSample`` or an mmdet
    ``DetDataSample`` as the task's own model gives, from one encoder pass over ``input_task``'s input."""

    def __init__(self, models: Dict[str, torch.nn.Module], input_task: str):
        if input_task not in models:
            raise AllTasksError(f'input_task={input_task!r} is none of the tasks {sorted(models)}')
        for name, model in models.items():
            # a decoder that reads the encoder's taps (MaskDecoder.tap_indices), on a frozen encoder
            if getattr(getattr(model, 'decoder', None), 'tap_indices', None) is None or \
                    not getattr(model.backbone, 'frozen', 0):
                raise AllTasksError(f'task {name!r}: one encoder pass can only serve decoders of their own on a '
                                    f'frozen encoder (PMTDecoder, model.backbone.frozen=True)')
        self.models, self.input_task = models, input_task
        self.backbone = models[input_task].backbone
        mine = self.backbone.state_dict()
        for name, model in models.items():
            theirs = model.backbone.state_dict()
            differ = [k for k in mine if k not in theirs or theirs[k].shape != mine[k].shape
                      or not torch.equal(theirs[k].to(mine[k].device), mine[k])]
            if differ or set(theirs) != set(mine):
                raise AllTasksError(f'task {name!r} was trained on another encoder than task {input_task!r} '
                                    f'(they differ at {(differ or sorted(set(theirs) ^ set(mine)))[:4]}): one pass '
                                    f'serves decoders of the same frozen encoder')
            model.backbone = self.backbone   # one encoder in memory
        self.indices = sorted({i for m in models.values() for i in m.decoder.tap_indices})

    def preprocess(self, image: np.ndarray):
        """The input task's test pipeline and data preprocessor: (inputs (1, 3, H, W), its data samples)."""
        from mmcv.transforms import Compose
        from mmengine.registry import DefaultScope
        model = self.models[self.input_task]
        pipeline = photo_pipeline(copy.deepcopy(model.cfg.test_dataloader.dataset.pipeline))
        pipeline[0] = dict(type='LoadImageFromNDArray')
        with DefaultScope.overwrite_default_scope(model.cfg.get('default_scope') or 'mmseg'):
            data = Compose(pipeline)(dict(img=image, img_id=0))
        data = model.data_preprocessor(dict(inputs=[data['inputs']], data_samples=[data['data_samples']]), False)
        return data['inputs'], data['data_samples']

    @staticmethod
    def _seg_samples(samples):
        """mmseg's data samples of the same input: its metas, with the padding mmseg crops off."""
        from mmseg.structures import SegDataSample
        out = []
        for s in samples:
            (h, w), (ph, pw) = s.img_shape, s.metainfo.get('pad_shape', s.img_shape)
            out.append(SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=s.ori_shape, pad_shape=(ph, pw),
                                                   padding_size=[0, pw - w, 0, ph - h])))
        return out

    @torch.no_grad()
    def predict(self, image: np.ndarray, shared: bool = True) -> Dict[str, object]:
        """``shared=False``: each task runs the encoder itself, as its own model would (the benchmark's
        baseline, tools/benchmark.py --all-tasks)."""
        inputs, samples = self.preprocess(image)
        if shared:
            taps, grid, rope = self.backbone.normed_tokens(inputs, self.indices)   # the one encoder pass
            by_index = dict(zip(self.indices, taps))
        results = {}
        for name, model in self.models.items():
            decoder = model.decoder
            encoded = (decoder.shared_pass(by_index, grid, rope, inputs.shape[-2:]) if shared
                       else decoder.encode(model.backbone, inputs))
            if task_of(model.cfg) == 'semantic':   # the shared input, whole, with mmseg's metas
                results[name] = model.predict_encoded(encoded, self._seg_samples(samples))[0]
            else:
                results[name] = model.predict_encoded(encoded, copy.deepcopy(samples))[0]
        return results


def init_all_tasks(config: Union[str, Config], checkpoints: Optional[Union[str, Path]] = None,
                   device: Optional[str] = None) -> AllTasksModel:
    """The all-tasks config's models (:func:`vit5seg.apis.init_model` each, its checkpoint from the folder
    ``checkpoints``), joined on one encoder."""
    from .inference import init_model
    cfg = Config.fromfile(str(config)) if not isinstance(config, Config) else config
    if not is_all_tasks_config(cfg):
        raise AllTasksError(f'{config}: an all-tasks config names tasks=dict(NAME=dict(config=..., checkpoint=...)) '
                            f'and no model of its own')
    models = {}
    for name, entry in cfg.tasks.items():
        checkpoint = entry.get('checkpoint')
        if checkpoint is not None and checkpoints is not None:
            checkpoint = Path(checkpoints) / checkpoint
            if not checkpoint.is_file():
                raise AllTasksError(f'task {name!r}: no checkpoint {checkpoint} (the config names '
                                    f'{entry["checkpoint"]} in the checkpoint folder)')
        models[name] = init_model(_task_config(entry), None if checkpoint is None else str(checkpoint), device=device)
    return AllTasksModel(models, cfg.get('input_task', next(iter(cfg.tasks))))
