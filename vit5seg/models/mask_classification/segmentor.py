"""Semantic segmentation by mask classification in mmseg: the task's glue around the core."""
from typing import Optional

from mmseg.models.segmentors import EncoderDecoder
from mmseg.registry import MODELS
from mmseg.utils import SampleList

from .core import EncoderPass, MaskClassificationCore


@MODELS.register_module()
class EoMTEncoderDecoder(MaskClassificationCore, EncoderDecoder):
    """mmseg's EncoderDecoder whose "features" are a query decoder's predictions (EoMT's by
    default: :mod:`.eomt`); predict, whole and slide inference, loss and the tools work
    unchanged.

    Needs a :class:`ViT5` backbone (EoMT: with ``final_norm=True``, every prediction goes
    through its final norm), a :class:`QueryHead` of the backbone's width, no neck and no
    auxiliary head. ``decoder``: a registered :class:`MaskDecoder` (default
    ``dict(type='EoMTDecoder')``).
    """

    def __init__(self, backbone: dict, decode_head: dict, decoder: Optional[dict] = None, **kwargs):
        if kwargs.get('neck') or kwargs.get('auxiliary_head'):
            raise ValueError('EoMTEncoderDecoder takes no neck and no auxiliary head: the queries of its '
                             'decode_head read the backbone tokens directly')
        super().__init__(backbone=backbone, decode_head=decode_head, **kwargs)
        self.build_decoder(decoder)

    def predict_encoded(self, encoded: EncoderPass, data_samples: SampleList) -> SampleList:
        """mmseg's ``predict`` of the whole input from an encoder pass already made (one shared by
        several tasks' decoders): the decoder's predictions, the head's per-pixel scores, mmseg's
        ``postprocess_result`` (the padding its metas name cut off, back to ``ori_shape``)."""
        metas = [sample.metainfo for sample in data_samples]
        logits = self.decode_head.predict(self.extract_feat(None, encoded), metas, self.test_cfg)
        return self.postprocess_result(logits, data_samples)


__all__ = ['EoMTEncoderDecoder']
