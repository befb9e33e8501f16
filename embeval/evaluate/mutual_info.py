"""Adjusted mutual information (Vinh, Epps & Bailey, 2010), the figure of scikit-learn's
adjusted_mutual_info_score (arithmetic mean of the entropies), with its expected mutual information
summed once per distinct pair of class and cluster sizes.

The expected mutual information of two labellings under the permutation model depends on the
labellings only through their class sizes a_i and cluster sizes b_j: it sums, over every pair (i, j)
and every possible overlap n_ij, the overlap's contribution weighted by its hypergeometric
probability. Pairs with the same two sizes contribute the same amount, so each distinct pair of
sizes is summed once and weighted by how many pairs have it. MTEB's clustering labels 16,384 draws
with hundreds of classes and clusters whose sizes take far fewer distinct values: the sum shrinks by
one to two orders of magnitude. Only the order of the additions differs from scikit-learn's
(tests/test_mteb_protocols.py: within scikit-learn's own rounding error, which grows with the pairs it
sums one after another: 1e-11 at 524 classes and clusters, 1e-8 with 16,384 singleton classes, where
this sum is the closer to a 40-digit computation). Where the sizes hardly repeat (few classes and
clusters, each large) the sum would not shrink enough to pay for numpy against scikit-learn's
compiled loop, and scikit-learn's own function gives the figure.
"""

import numpy as np
from scipy.special import gammaln
from sklearn.metrics import adjusted_mutual_info_score, mutual_info_score
from sklearn.metrics.cluster import contingency_matrix

# scikit-learn's compiled loop against this module's numpy, per overlap: 75-87 ns against 50-130 ns
# (bench/ami_cost.py); 2 leaves scikit-learn the cases where the sums are close
CYTHON_SPEEDUP = 2
TERMS_PER_BLOCK = 1 << 21  # overlaps evaluated at once (about 16 MiB per float64 array)
EPS = np.finfo(np.float64).eps


def expected_mutual_info(class_sizes: np.ndarray, cluster_sizes: np.ndarray, n: int) -> float:
    """E[MI] (nats) of two labellings of n items with these class and cluster sizes (positive integers),
    when the labels are permuted at random."""
    if class_sizes.size <= 1 or cluster_sizes.size <= 1:
        return 0.0
    a_sizes, a_counts = np.unique(np.asarray(class_sizes, dtype=np.int64), return_counts=True)
    b_sizes, b_counts = np.unique(np.asarray(cluster_sizes, dtype=np.int64), return_counts=True)
    a = np.repeat(a_sizes, len(b_sizes))
    b = np.tile(b_sizes, len(a_sizes))
    pairs = np.outer(a_counts, b_counts).ravel().astype(np.float64)
    low = np.maximum(1, a + b - n)
    lengths = np.maximum(np.minimum(a, b) - low + 1, 0)
    # log-gamma and log of the integers up to n + 1, looked up (the same values as computed term by term)
    lgamma = gammaln(np.arange(n + 2, dtype=np.int64))
    with np.errstate(divide="ignore"):
        log = np.log(np.arange(n + 1, dtype=np.int64))
    # the overlap-independent part of each pair's log-probability
    fixed = lgamma[a + 1] + lgamma[b + 1] + lgamma[n - a + 1] + lgamma[n - b + 1] - lgamma[n + 1]
    total = 0.0
    start = 0
    while start < len(a):
        ends = np.cumsum(lengths[start:])
        stop = start + max(int(np.searchsorted(ends, TERMS_PER_BLOCK, side="right")), 1)
        block = np.arange(start, stop)
        counts = lengths[block]
        pair = np.repeat(block, counts)
        first = np.cumsum(counts) - counts
        overlap = low[pair] + np.arange(len(pair)) - np.repeat(first, counts)
        ai, bi = a[pair], b[pair]
        log_p = (
            fixed[pair]
            - lgamma[overlap + 1]
            - lgamma[ai - overlap + 1]
            - lgamma[bi - overlap + 1]
            - lgamma[n - ai - bi + overlap + 1]
        )
        mi = (np.log(n) + log[overlap] - log[ai] - log[bi]) * (overlap / n)
        sums = np.bincount(pair - start, weights=mi * np.exp(log_p), minlength=len(block))
        total += float(sums @ pairs[block])
        start = stop
    return total


def _terms(class_sizes: np.ndarray, cluster_sizes: np.ndarray, n: int, distinct: bool = False) -> int:
    """The overlaps the expected mutual information sums: over every pair of sizes, or over the
    distinct pairs (this module's sum). Counted per distinct pair of sizes (at most about sqrt(2n)
    distinct sizes a side, as they sum to n), never over every pair at once."""
    a, a_counts = np.unique(np.asarray(class_sizes, dtype=np.int64), return_counts=True)
    b, b_counts = np.unique(np.asarray(cluster_sizes, dtype=np.int64), return_counts=True)
    lengths = np.maximum(np.minimum(a[:, None], b[None, :]) - np.maximum(1, a[:, None] + b[None, :] - n) + 1, 0)
    return int(lengths.sum() if distinct else (lengths * np.outer(a_counts, b_counts)).sum())


def _entropy(sizes: np.ndarray) -> float:
    """Shannon entropy (nats) of a labelling with these class sizes."""
    if sizes.size <= 1:
        return 0.0
    p = sizes.astype(np.float64)
    whole = p.sum()
    return float(-np.sum((p / whole) * (np.log(p) - np.log(whole))))


def adjusted_mutual_info(labels_true, labels_pred) -> float:
    """adjusted_mutual_info_score(labels_true, labels_pred): (MI - E[MI]) / (mean entropy - E[MI]),
    numerator and denominator kept at least machine epsilon away from 0 with their sign, 1 when
    neither labelling splits the items and 0 when only one of them does not."""
    labels_true, labels_pred = np.asarray(labels_true), np.asarray(labels_pred)
    if labels_true.ndim != 1 or labels_true.shape != labels_pred.shape:
        return float(adjusted_mutual_info_score(labels_true, labels_pred))  # its own error
    n = len(labels_true)
    class_sizes = np.unique(labels_true, return_counts=True)[1]
    cluster_sizes = np.unique(labels_pred, return_counts=True)[1]
    if class_sizes.size == cluster_sizes.size and class_sizes.size <= 1:
        return 1.0
    if class_sizes.size == 1 or cluster_sizes.size == 1:
        return 0.0
    if _terms(class_sizes, cluster_sizes, n, distinct=True) * CYTHON_SPEEDUP > _terms(class_sizes, cluster_sizes, n):
        return float(adjusted_mutual_info_score(labels_true, labels_pred))  # few sizes repeat: its own loop
    mi = mutual_info_score(None, None, contingency=contingency_matrix(labels_true, labels_pred, sparse=True))
    emi = expected_mutual_info(class_sizes, cluster_sizes, n)
    denominator = (_entropy(class_sizes) + _entropy(cluster_sizes)) / 2 - emi
    numerator = mi - emi
    denominator = min(denominator, -EPS) if denominator < 0 else max(denominator, EPS)
    numerator = min(numerator, -EPS) if numerator < 0 else max(numerator, EPS)
    return float(numerator / denominator)
