"""Small helpers more than one part of the package needs, on the lowest floor: image files
and drawing, timing, CSV tables, the CUDA-dispatch simulation. They import nothing of
vit5seg above them."""
