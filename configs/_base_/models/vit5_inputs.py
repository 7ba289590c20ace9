# What every ViT-5 segmentor here shares: the package's registrations and the ImageNet input
# normalisation of the pretrained weights (the model files inherit it into model.data_preprocessor).
custom_imports = dict(imports=['vit5seg'], allow_failed_imports=False)
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],  # ImageNet, RGB
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,
    seg_pad_val=255)
model = dict(data_preprocessor=data_preprocessor)
