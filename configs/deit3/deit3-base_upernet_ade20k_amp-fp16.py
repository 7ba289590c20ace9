# Mixed precision in float16 (GPU) with dynamic loss scaling, as tools/train.py --amp.
_base_ = ['../deit3_upernet_ade20k.py']
optim_wrapper = dict(type='AmpOptimWrapper', dtype='float16', loss_scale='dynamic')
