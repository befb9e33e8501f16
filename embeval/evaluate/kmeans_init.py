"""k-means++ seeding for scikit-learn's MiniBatchKMeans, the same centers bit for bit as its own
"k-means++" on float32 rows, in about half its time.

MTEB's clustering runs MiniBatchKMeans(init="k-means++") on float32 embeddings. Its seeding scores
each round's candidate centers against the init sample through float64 copies of both, made again
(with the rows' squared norms) in every round. `seeding` makes the float64 copy and the norms once
per fit and repeats the same arithmetic: the same chunks of rows, the same float64 matrix products
and sums, rounded to float32 at the same points, and the same draws from the estimator's
RandomState in the same order, so the centers, and every clustering that follows, are the same.
With many clusters (rounds x candidates at least half the sample's distinct rows) it goes further:
the init sample's distinct rows' float64 products with each other are made at once (one matrix
product instead of one per round), turned into float32 squared distances by the same additions,
and each round reads its candidates' rows from that table. A product's element does not depend on
the shapes around it where the BLAS computes each element by the same sum over the dimensions
(OpenBLAS's and MKL's matrix products with two rows or more); the first round of every fit checks
that, computing its distances both ways, and the table is used only when they are equal bit for bit.

Checked against the scikit-learn versions in VERIFIED (tests/test_mteb_clustering.py compares the
fitted labels and centers); any other version, or rows that are not float32, get scikit-learn's own
"k-means++".

`fit_predict` is MiniBatchKMeans's fit_predict on rows drawn with replacement from fewer distinct
rows (MTEB's clustering experiments: 16,384 draws of the embedded documents): the fit is
scikit-learn's own, and the final labels, which scikit-learn computes for every drawn row in chunks
of 256 rows (a matrix product per chunk, then each row's nearest center), are computed once per
distinct row, in chunks of 256 rows too (the last one filled with copies): each row's distances are
the same products of the same shapes, so its label is the same.
"""

import math

import numpy as np
import sklearn
from sklearn.utils.extmath import row_norms

VERIFIED = ("1.9",)  # scikit-learn major.minor versions whose k-means++ `seeding` and labels reproduce
LABEL_CHUNK = 256  # the rows per matrix product of scikit-learn's labelling (sklearn.cluster._k_means_common)


def _verified(vectors: np.ndarray) -> bool:
    version = ".".join(sklearn.__version__.split(".")[:2])
    return version in VERIFIED and np.asarray(vectors).dtype == np.float32


def init_for(vectors: np.ndarray):
    """MiniBatchKMeans's `init` for these rows: `seeding` where it gives scikit-learn's centers, else
    "k-means++" itself. Pass n_init=1 with it (as MTEB's clustering does)."""
    return seeding if _verified(vectors) else "k-means++"


def fit_predict(model, vectors: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """model.fit_predict(vectors[drawn]) (model a MiniBatchKMeans), its final labels computed once per
    distinct row of `vectors` drawn (see the module docstring) where the version is verified."""
    from sklearn.cluster import _k_means_common, _kmeans

    rows = vectors[drawn]
    distinct, inverse = np.unique(drawn, return_inverse=True)
    if not _verified(rows) or _k_means_common.CHUNK_SIZE != LABEL_CHUNK or len(distinct) * 2 > len(drawn):
        return model.fit_predict(rows)
    model.set_params(compute_labels=False).fit(rows)
    once = vectors[distinct]
    fill = -len(once) % LABEL_CHUNK
    if fill:
        once = np.concatenate([once, np.repeat(once[-1:], fill, axis=0)])
    centers = model.cluster_centers_
    labels = _kmeans._labels_inertia(
        once, np.ones(len(once), dtype=once.dtype), centers, n_threads=1, return_inertia=False
    )
    return labels[: len(distinct)][inverse.reshape(-1)]


def _chunk_rows(n_x: int, n_y: int, d: int) -> int:
    """Rows per chunk of scikit-learn's float64 distance computation for float32 input (about 10% of
    the memory of both sides and their distances, at least 10 MiB)."""
    allowed = max(((n_x + n_y) * d + n_x * n_y) / 10, 10 * 2**17)
    return max(int((-2 * d + math.sqrt((2 * d) ** 2 + 4 * allowed)) / 2), 1)


class _Float64Rows:
    """The init sample in float64, and its chunks' squared norms by chunk size, made once."""

    def __init__(self, rows: np.ndarray):
        self.wide = rows.astype(np.float64)
        self.norms: dict[int, list[tuple[slice, np.ndarray]]] = {}

    def _chunks(self, size: int) -> list[tuple[slice, np.ndarray]]:
        if size not in self.norms:
            n = len(self.wide)
            spans = [slice(a, min(a + size, n)) for a in range(0, n, size)]
            self.norms[size] = [(span, row_norms(self.wide[span], squared=True)[None, :]) for span in spans]
        return self.norms[size]

    def squared_distances(self, chosen: np.ndarray) -> np.ndarray:
        """float32 (len(chosen), n) squared distances of rows `chosen` to every row, clipped at 0."""
        n, d = self.wide.shape
        size = _chunk_rows(len(chosen), n, d)
        out = np.empty((len(chosen), n), dtype=np.float32)
        for a in range(0, len(chosen), size):
            near = self.wide[chosen[a : a + size]]
            near_norms = row_norms(near, squared=True)[:, None]
            for span, norms in self._chunks(size):
                block = -2 * (near @ self.wide[span].T)
                block += near_norms
                block += norms
                out[a : a + size, span] = block.astype(np.float32, copy=False)
        np.maximum(out, 0, out=out)
        return out


TABLE_BYTES = 256 * 2**20  # at most this for the table of the init sample's distances (float64 products, float32)
_table_agrees = True  # False once a fit's check found the table's distances other than the rounds' own


class _DistanceTable:
    """float32 squared distances between every two rows of the init sample, from one product of its
    distinct rows' float64 copies: what _Float64Rows.squared_distances gives for several rows at once."""

    def __init__(self, wide: _Float64Rows):
        width = wide.wide.shape[1] * wide.wide.itemsize
        keys = np.ascontiguousarray(wide.wide).view(np.dtype((np.void, width))).reshape(-1)
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        distinct = wide.wide[first]
        norms = row_norms(distinct, squared=True)
        table = -2 * (distinct @ distinct.T)
        table += norms[:, None]
        table += norms[None, :]
        self.table = table.astype(np.float32)
        np.maximum(self.table, 0, out=self.table)
        self.inverse = inverse.reshape(-1)

    @staticmethod
    def worth_it(wide: _Float64Rows, rounds: int, candidates: int) -> bool:
        """Whether the rounds' products outweigh the table's, and the table fits TABLE_BYTES (counted on
        every row; duplicates only make it smaller), for a chunk of candidates with two rows or more."""
        n, d = wide.wide.shape
        size = _chunk_rows(candidates, n, d)
        whole_chunks = size >= candidates or (size >= 2 and candidates % size != 1)
        return _table_agrees and whole_chunks and rounds * candidates * 2 >= n and n * n * 12 <= TABLE_BYTES

    def squared_distances(self, chosen: np.ndarray) -> np.ndarray:
        out = np.empty((len(chosen), len(self.inverse)), dtype=np.float32)  # C order, as the rounds' own
        return np.take(self.table[self.inverse[chosen]], self.inverse, axis=1, out=out)


def seeding(rows: np.ndarray, n_clusters: int, random_state: np.random.RandomState) -> np.ndarray:
    """(n_clusters, d) initial centers chosen among `rows` (float32, unit weights) by greedy k-means++
    with 2 + log(k) candidates a round: MiniBatchKMeans's `init` callable."""
    global _table_agrees
    n, d = rows.shape
    weights = np.ones(n, dtype=rows.dtype)
    wide = _Float64Rows(rows)
    centers = np.empty((n_clusters, d), dtype=rows.dtype)
    candidates = 2 + int(np.log(n_clusters))
    first = random_state.choice(n, p=weights / weights.sum())
    centers[0] = rows[first]
    nearest = wide.squared_distances(np.array([first]))
    potential = nearest @ weights
    distances = wide.squared_distances
    table = _DistanceTable(wide) if _DistanceTable.worth_it(wide, n_clusters - 1, candidates) else None
    for c in range(1, n_clusters):
        targets = random_state.uniform(size=candidates) * potential
        chosen = np.searchsorted(np.cumsum(weights * nearest), targets)
        np.clip(chosen, None, nearest.size - 1, out=chosen)
        trial = distances(chosen)
        if table is not None:  # the first round: the table's distances must be these, bit for bit
            if np.array_equal(trial, table.squared_distances(chosen)):
                distances = table.squared_distances
            else:
                _table_agrees = False
            table = None
        np.minimum(nearest, trial, out=trial)
        potentials = trial @ weights.reshape(-1, 1)
        best = np.argmin(potentials)
        potential, nearest = potentials[best], trial[best]
        centers[c] = rows[chosen[best]]
    return centers
