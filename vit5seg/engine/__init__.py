from .optim_constructor import ViT5OptimWrapperConstructor, no_weight_decay, vit5_layer_id

__all__ = ['ViT5OptimWrapperConstructor', 'no_weight_decay', 'vit5_layer_id']
