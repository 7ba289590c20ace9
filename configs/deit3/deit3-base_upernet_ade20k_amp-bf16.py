# Mixed precision in bfloat16 (GPU): no loss scaling needed; RMSNorm and softmax run in float32.
_base_ = ['../deit3_upernet_ade20k.py']
optim_wrapper = dict(type='AmpOptimWrapper', dtype='bfloat16')
