"""The evaluation machinery the kinds of task share, over tensors: SentEval's classification
protocols (classify), cosine STS (sts), the relatedness regressor (relatedness), COCO's ranking
model (ranking), the probing classifiers (probing), normalization, geometry diagnostics and the
stacking of several files' fits (stack). Each kind (embeval/kinds/) says which it uses."""
