from .accumulation import AccumulatingIterBasedTrainLoop, AccumulationError
from .card_hook import RecipeCardHook
from .checkpoint_io import allow_unsafe_loading, atomic_torch_save, latest_complete_checkpoint
from .hooks import NonFiniteLossError, NonFiniteLossHook, RandomStateHook, SkippedSampleHook
from .mask_annealing import EoMTMaskAnnealingHook
from .optim_constructor import ViT5OptimWrapperConstructor, no_weight_decay, vit5_layer_id
from .recipe import RecipeCard, recipe_card
from .runner import ViT5Runner
from .schedules import TwoStageWarmupPolyLR, WarmupCosineLR, WarmupOneCycleLR

__all__ = ['AccumulatingIterBasedTrainLoop', 'AccumulationError', 'EoMTMaskAnnealingHook', 'NonFiniteLossError',
           'NonFiniteLossHook', 'RandomStateHook', 'RecipeCard', 'RecipeCardHook', 'SkippedSampleHook', 'TwoStageWarmupPolyLR',
           'WarmupCosineLR', 'WarmupOneCycleLR', 'ViT5OptimWrapperConstructor', 'ViT5Runner', 'allow_unsafe_loading',
           'atomic_torch_save',
           'latest_complete_checkpoint', 'no_weight_decay', 'recipe_card', 'vit5_layer_id']
