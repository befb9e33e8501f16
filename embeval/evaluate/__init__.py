"""Evaluators by name (the registry's `evaluator` field). A name absent here is not implemented yet."""

from embeval.evaluate import classify, probing, relatedness, retrieval, sts

EVALUATORS = {
    "cosine_sts": sts.evaluate_cosine_sts,
    "relatedness": relatedness.evaluate_relatedness,
    "retrieval": retrieval.evaluate_retrieval,
    "inner_kfold": classify.with_classifiers(classify.inner_kfold),
    "kfold": classify.with_classifiers(classify.kfold),
    "split": classify.with_classifiers(classify.split),
    "probing": probing.evaluate_probing,
}
