"""The models that turn raw inputs into features (EfficientNet-Lite0 for images, a bag of words or
MiniLM for texts), their preprocessing, and the optional packages they need.

This package sits below both :mod:`dmh.featurize` (folders and files -> data files) and
:mod:`dmh.featurizer_spec` (the saved settings that featurize new inputs as a model's training
data was), so that neither has to import the other's package to reach the models. Its public
names are re-exported by :mod:`dmh.featurize`.
"""
