"""Pure-PyTorch versions of the compiled mmcv ops our configs reach on a GPU, for a
stack whose mmcv has no compiled ops (mmcv-lite). ``compat`` installs them where mmcv
would call its kernel; ``FALLBACK_CALLS`` counts their use per op (read by the registry
audit and the self-check). Each is tested against a reference written from the op's
definition (tests/test_compat_cuda_branches.py).
"""
import collections

import torch

FALLBACK_CALLS: 'collections.Counter[str]' = collections.Counter()


class DeformAttnPytorch:
    """Takes the place of mmcv's ``MultiScaleDeformableAttnFunction`` (same ``apply``
    signature) and computes with mmcv's own ``multi_scale_deformable_attn_pytorch``:
    grid_sample per level, exact to the kernel up to float rounding, more memory."""

    @staticmethod
    def apply(value, spatial_shapes, level_start_index, sampling_locations, attention_weights, im2col_step):
        from mmcv.ops.multi_scale_deform_attn import multi_scale_deformable_attn_pytorch
        FALLBACK_CALLS['ms_deform_attn'] += 1
        return multi_scale_deformable_attn_pytorch(value, spatial_shapes, sampling_locations, attention_weights)


def sigmoid_focal_loss_pytorch(pred, target, gamma=2.0, alpha=0.25, weight=None, reduction='mean'):
    """mmcv's compiled ``sigmoid_focal_loss`` in PyTorch: ``pred`` (N, C) logits, ``target``
    (N,) class ids where C means background; ``weight`` (C,) scales each sample by its
    target's entry; ``'mean'`` divides the sum by N, as the kernel does. One intended
    difference: the kernel reads ``weight[C]`` for a background sample, past the end of the
    tensor (undefined); here that sample keeps weight 1."""
    from mmseg.models.losses.focal_loss import py_sigmoid_focal_loss
    FALLBACK_CALLS['sigmoid_focal_loss'] += 1
    num_classes = pred.size(1)
    one_hot = torch.nn.functional.one_hot(target.long(), num_classes + 1)[:, :num_classes]
    loss = py_sigmoid_focal_loss(pred, one_hot, None, gamma=gamma, alpha=alpha, reduction='none')
    if weight is not None:
        foreground = target.long() < num_classes
        per_sample = torch.where(foreground, weight[target.long().clamp(max=num_classes - 1)], 1.0)
        loss = loss * per_sample.view(-1, 1)
    if reduction == 'mean':
        return loss.sum() / pred.size(0)
    return loss.sum() if reduction == 'sum' else loss


def psa_mask_pytorch(mask, psa_type: int, mask_size):
    """mmcv's compiled ``psa_mask`` (PSANet's point-wise spatial attention) as one gather.

    ``mask`` (N, Hm*Wm, H, W) holds, for each position p, a window of Hm x Wm weights
    centred on p. ``collect`` (0) returns (N, H*W, H, W) with out[:, q, p] = the weight
    of p's window at q (zero outside the window); ``distribute`` (1) returns its transpose
    out[:, p, q]. Autograd gives the backward the kernel computes by hand.
    """
    FALLBACK_CALLS['psa_mask'] += 1
    n, channels, h, w = mask.shape
    hm, wm = (mask_size, mask_size) if isinstance(mask_size, int) else mask_size
    if channels != hm * wm:
        raise ValueError(f'psa_mask: {channels} channels for a {hm}x{wm} mask')
    rows, cols = torch.meshgrid(torch.arange(h, device=mask.device), torch.arange(w, device=mask.device),
                                indexing='ij')
    rows, cols = rows.reshape(-1), cols.reshape(-1)
    # window offset of target q (rows) seen from centre p (columns); outside -> the zero channel
    dr = rows[:, None] - rows[None, :] + (hm - 1) // 2
    dc = cols[:, None] - cols[None, :] + (wm - 1) // 2
    inside = (dr >= 0) & (dr < hm) & (dc >= 0) & (dc < wm)
    index = torch.where(inside, dr * wm + dc, torch.full_like(dr, channels))       # (HW_q, HW_p)
    padded = torch.cat([mask.reshape(n, channels, h * w), mask.new_zeros(n, 1, h * w)], dim=1)
    out = torch.gather(padded, 1, index.expand(n, -1, -1))                         # (N, HW_q, HW_p)
    if psa_type == 1:
        out = out.transpose(1, 2)
    return out.reshape(n, h * w, h, w)
