"""k-means++ seeding for scikit-learn's MiniBatchKMeans, the same centers bit for bit as its own
"k-means++" on float32 rows, in about half its time.

MTEB's clustering runs MiniBatchKMeans(init="k-means++") on float32 embeddings. Its seeding scores
each round's candidate centers against the init sample through float64 copies of both, made again
(with the rows' squared norms) in every round. `seeding` makes the float64 copy and the norms once
per fit and repeats the same arithmetic: the same chunks of rows, the same float64 matrix products
and sums, rounded to float32 at the same points, and the same draws from the estimator's
RandomState in the same order, so the centers, and every clustering that follows, are the same.

Checked against the scikit-learn versions in VERIFIED (tests/test_mteb_clustering.py compares the
fitted labels and centers); any other version, or rows that are not float32, get scikit-learn's own
"k-means++".
"""

import math

import numpy as np
import sklearn
from sklearn.utils.extmath import row_norms

VERIFIED = ("1.9",)  # scikit-learn major.minor versions whose k-means++ `seeding` reproduces


def init_for(vectors: np.ndarray):
    """MiniBatchKMeans's `init` for these rows: `seeding` where it gives scikit-learn's centers, else
    "k-means++" itself. Pass n_init=1 with it (as MTEB's clustering does)."""
    version = ".".join(sklearn.__version__.split(".")[:2])
    return seeding if version in VERIFIED and np.asarray(vectors).dtype == np.float32 else "k-means++"


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


def seeding(rows: np.ndarray, n_clusters: int, random_state: np.random.RandomState) -> np.ndarray:
    """(n_clusters, d) initial centers chosen among `rows` (float32, unit weights) by greedy k-means++
    with 2 + log(k) candidates a round: MiniBatchKMeans's `init` callable."""
    n, d = rows.shape
    weights = np.ones(n, dtype=rows.dtype)
    wide = _Float64Rows(rows)
    centers = np.empty((n_clusters, d), dtype=rows.dtype)
    candidates = 2 + int(np.log(n_clusters))
    first = random_state.choice(n, p=weights / weights.sum())
    centers[0] = rows[first]
    nearest = wide.squared_distances(np.array([first]))
    potential = nearest @ weights
    for c in range(1, n_clusters):
        targets = random_state.uniform(size=candidates) * potential
        chosen = np.searchsorted(np.cumsum(weights * nearest), targets)
        np.clip(chosen, None, nearest.size - 1, out=chosen)
        trial = wide.squared_distances(chosen)
        np.minimum(nearest, trial, out=trial)
        potentials = trial @ weights.reshape(-1, 1)
        best = np.argmin(potentials)
        potential, nearest = potentials[best], trial[best]
        centers[c] = rows[chosen[best]]
    return centers
