"""The exact search (embeval/train/search.py) against a numpy brute force, its tie rule, its budget,
its shards and its device audit.

Scores are float32 matmuls, and BLAS rounds a dot product differently for different block shapes
(measured here: up to 6e-5 on 384-d random vectors, between a 1-row and a 300-row matmul). So
searches with different blocks (budgets, shards) are compared bit for bit on data whose dot products
are exact in float32 (small integers, and +-1/2 after the cosine's normalization), and against the
float64 brute force on random data to float32 rounding (measured: at most 3e-7 for cosine, 5e-6 for
dot products of 32-d normal vectors), with identical rows where no two scores are near.
"""

import zlib

import numpy as np
import pytest
import torch

from embeval.audit import DeviceAudit
from embeval.errors import EmbevalError
from embeval.train import search

KINDS = ("cosine", "dot")


def reader(corpus, calls=None):
    def read(start, stop):
        if calls is not None:
            calls.append((start, stop))
        return corpus[start:stop]

    return read


def brute_force(queries, corpus, k, similarity):
    """float64 scores, and rows ranked by (score desc, row asc)."""
    q, c = queries.astype(np.float64), corpus.astype(np.float64)
    if similarity == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        c = c / np.maximum(np.linalg.norm(c, axis=1, keepdims=True), 1e-12)
    scores = q @ c.T
    order = np.argsort(-scores, axis=1, kind="stable")
    return scores, order[:, :k]


def without_near_ties(queries, corpus, k, similarity, gap=2e-5, seed=0):
    """corpus with the rows that come within `gap` of a neighbour among a query's k + 1 best redrawn,
    until there are none: each query's best rows are determined despite float32 rounding."""
    rng = np.random.default_rng(seed)
    corpus = corpus.copy()
    while True:
        scores, order = brute_force(queries, corpus, k + 1, similarity)
        near = np.abs(np.diff(np.take_along_axis(scores, order, axis=1), axis=1)) < gap
        clash = np.unique(np.concatenate([order[:, :-1][near], order[:, 1:][near]]))
        if not len(clash):
            return corpus
        corpus[clash] = rng.normal(size=(len(clash), corpus.shape[1]))


def exact_vectors(rng, n, d, similarity):
    """Vectors whose float32 dot products are exact: four entries +-1 (norm 2: cosine's halves), or
    small integers for dot; many scores are exactly equal."""
    if similarity == "dot":
        return rng.integers(-3, 4, size=(n, d)).astype(np.float32)
    out = np.zeros((n, d), dtype=np.float32)
    for row in out:
        row[rng.choice(d, 4, replace=False)] = rng.choice([-1.0, 1.0], 4)
    return out


def search_all(queries, corpus, k, similarity, budget=search.DEFAULT_BUDGET_BYTES, **kw):
    return search.top_k(queries, reader(corpus), len(corpus), k, similarity, budget, **kw)


@pytest.mark.parametrize("similarity", KINDS)
@pytest.mark.parametrize("filtered", [False, True])
def test_equals_brute_force_on_random_vectors(similarity, filtered):
    """Scores to float32 rounding, rows identical: the data have no near ties among each query's
    k + 1 best (checked), and several corpus blocks (the planner's, under a budget) are merged."""
    rng = np.random.default_rng(1)
    queries = rng.normal(size=(40, 32)).astype(np.float32)
    k = 50
    corpus = without_near_ties(queries, rng.normal(size=(6000, 32)).astype(np.float32), k, similarity)
    scores, order = brute_force(queries, corpus, k + 1, similarity)
    top = np.take_along_axis(scores, order, axis=1)
    assert np.diff(-top, axis=1).min() >= 2e-5
    plan = search.plan_search(40, 32, k, 6000, 1 << 20)
    assert plan.corpus_block < 6000 and plan.query_block < 40 and plan.group > 1
    got, rows = search_all(queries, corpus, k, similarity, 1 << 20, filtered=filtered)
    assert got.dtype == np.float32 and rows.dtype == np.int64 and got.shape == rows.shape == (40, k)
    np.testing.assert_array_equal(rows, order[:, :k])
    tolerance = 1e-6 if similarity == "cosine" else 2e-5
    np.testing.assert_allclose(got, top[:, :k], rtol=0, atol=tolerance)


@pytest.mark.parametrize("similarity", KINDS)
def test_exact_ties_rank_lowest_row_first(similarity):
    """Duplicated rows and exact dot products: equal scores are ranked by row, lowest first, across
    block boundaries too (small blocks), and the scores equal the brute force's exactly."""
    rng = np.random.default_rng(2)
    base = exact_vectors(rng, 700, 12, similarity)
    corpus = np.concatenate([base, base[::-1], base[:300]])  # each vector 2 or 3 times
    queries = exact_vectors(rng, 30, 12, similarity)
    k = 120
    scores, order = brute_force(queries, corpus, k, similarity)
    top = np.take_along_axis(scores, order, axis=1)
    assert (top[:, :-1] == top[:, 1:]).mean() > 0.5  # mostly ties
    for budget in (search.DEFAULT_BUDGET_BYTES, 400_000):
        got, rows = search_all(queries, corpus, k, similarity, budget)
        np.testing.assert_array_equal(rows, order)
        np.testing.assert_array_equal(got, top.astype(np.float32))


@pytest.mark.parametrize("similarity", KINDS)
def test_tiny_budget_equals_large_budget_bit_for_bit(similarity):
    """A budget that forces several sweeps of the queries, small query blocks and small corpus
    blocks (with every row a candidate) returns the same scores and rows as one large block."""
    rng = np.random.default_rng(3)
    corpus = exact_vectors(rng, 3001, 16, similarity)
    queries = exact_vectors(rng, 23, 16, similarity)
    k = 40
    tiny = search.plan_search(23, 16, k, 3001, 60_000)
    large = search.plan_search(23, 16, k, 3001, 1 << 30)
    assert tiny.query_pass < 23 and tiny.query_block < 8 and tiny.corpus_block < 200
    assert tiny.bytes <= 60_000 and large.corpus_block == 3001 and large.query_pass == 23
    calls = []
    small = search.top_k(queries, reader(corpus, calls), 3001, k, similarity, 60_000)
    assert len(calls) > 3001 // tiny.corpus_block
    for filtered in (False, True):
        big = search_all(queries, corpus, k, similarity, filtered=filtered)
        np.testing.assert_array_equal(small[0], big[0])
        np.testing.assert_array_equal(small[1], big[1])


@pytest.mark.parametrize("similarity", KINDS)
def test_shards_merged_equal_one_pass(similarity):
    """Three uneven shards, searched alone and merged, give one pass's results; the merge keeps the
    tie rule when a shard ends inside a run of equal scores."""
    rng = np.random.default_rng(4)
    corpus = exact_vectors(rng, 2500, 10, similarity)
    queries = exact_vectors(rng, 17, 10, similarity)
    k = 60
    whole = search_all(queries, corpus, k, similarity)
    bounds = [0, 37, 1300, 2500]
    parts = []
    for a, b in zip(bounds, bounds[1:]):
        part = search.top_k(queries, reader(corpus), len(corpus), k, similarity, rows=(a, b))
        assert part[0].shape == (17, min(k, b - a)) and ((part[1] >= a) & (part[1] < b)).all()
        parts.append(part)
    merged = search.merge_top_k(parts, k)
    np.testing.assert_array_equal(merged[0], whole[0])
    np.testing.assert_array_equal(merged[1], whole[1])


def test_zero_vectors_score_zero_under_cosine():
    """A zero query scores 0 against everything (its top-k: rows 0..k-1), a zero document scores 0
    against every query; no NaN."""
    rng = np.random.default_rng(5)
    corpus = rng.normal(size=(500, 8)).astype(np.float32)
    corpus[[3, 250]] = 0
    queries = rng.normal(size=(6, 8)).astype(np.float32)
    queries[2] = 0
    got, rows = search_all(queries, corpus, 500, "cosine")
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(rows[2], np.arange(500))
    assert (got[2] == 0).all()
    for i in (0, 1, 3, 4, 5):
        assert got[i][np.isin(rows[i], [3, 250])].tolist() == [0.0, 0.0]


def test_keys_order_scores_then_rows():
    """A key's order is (score desc, row asc) for negative, zero (either sign), denormal, infinite and
    ordinary scores, and decodes back (-0.0 as 0.0)."""
    tiny = np.float32(1e-45)
    values = np.array([-np.inf, -3.5, -1.0, -tiny, -0.0, 0.0, tiny, 1e-30, 0.5, 1.0, 7.25, np.inf], np.float32)
    scores = np.repeat(values, 3)
    rows = np.arange(len(scores)) * 7 % len(scores)  # distinct rows, in no particular order
    rows[[0, 13, 16]] = [2**31 - 1, 2**31 - 2, 2**30]
    keys = search.encode(scores, rows)
    ranked = torch.argsort(keys, descending=True).numpy()
    expected = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), int(rows[i])))
    assert ranked.tolist() == expected
    back, back_rows = search.decode(keys)
    np.testing.assert_array_equal(back.numpy(), scores + np.float32(0))
    np.testing.assert_array_equal(back_rows.numpy(), rows)


def test_k_larger_than_the_shard_and_empty_inputs():
    rng = np.random.default_rng(6)
    corpus = rng.normal(size=(30, 4)).astype(np.float32)
    queries = rng.normal(size=(3, 4)).astype(np.float32)
    got, rows = search.top_k(queries, reader(corpus), 30, 100, "dot", rows=(10, 25))
    assert rows.shape == (3, 15) and sorted(rows[0]) == list(range(10, 25))
    assert search.top_k(queries, reader(corpus), 30, 5, rows=(7, 7))[0].shape == (3, 0)
    assert search.top_k(queries[:0], reader(corpus), 30, 5)[1].shape == (0, 5)


def test_budget_too_small_for_one_row_is_refused():
    queries = np.ones((10, 384), dtype=np.float32)
    least = search.plan_search(10, 384, 1000, 5000, 1 << 30)
    assert least.bytes <= 1 << 30
    with pytest.raises(EmbevalError) as err:
        search.top_k(queries, reader(np.ones((5000, 384), np.float32)), 5000, 1000, budget_bytes=50_000)
    message = str(err.value)
    need = float(message.split("needs at least ")[1].split(" MiB")[0])
    assert need > 0.05 and "memory budget is 0.05 MiB" in message and "\n" not in message


def test_bad_arguments():
    queries = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="similarity"):
        search.top_k(queries, reader(np.ones((4, 3), np.float32)), 4, 2, "l2")
    with pytest.raises(ValueError, match="k must"):
        search.top_k(queries, reader(np.ones((4, 3), np.float32)), 4, 0)
    with pytest.raises(ValueError, match="range"):
        search.top_k(queries, reader(np.ones((4, 3), np.float32)), 4, 2, rows=(3, 5))
    with pytest.raises(ValueError, match="returned shape"):
        search.top_k(queries, reader(np.ones((4, 2), np.float32)), 4, 2)


def test_search_loop_passes_the_device_audit():
    """The device path (no filter) over many corpus blocks and query blocks: no host synchronisation
    and no copy in the loops; one copy to the device per corpus piece read (by the float32 pass and
    the exact re-scoring) and per sweep's queries, and four transfers back per sweep: where each
    piece's candidates begin, which lists are certain, and the results' two copies."""
    rng = np.random.default_rng(7)
    corpus = rng.normal(size=(4000, 16)).astype(np.float32)
    queries = rng.normal(size=(300, 16)).astype(np.float32)
    budget = 1_200_000
    plan = search.plan_search(300, 16, 20, 4000, budget, filtered=False)
    assert plan.query_pass == 300 and plan.query_block < 300 and plan.corpus_block < 4000 and plan.group > 1
    calls = []
    with DeviceAudit(torch.device("cpu")) as audit:
        got = search.top_k(queries, reader(corpus, calls), 4000, 20, "cosine", budget, filtered=False)
    report = audit.report()
    assert audit.total("cross_device") == 0 and audit.total("numpy_of_device") == 0, report
    assert len(calls) > 4000 // plan.corpus_block
    assert audit.total("copy_to_device") == len(calls) + 1, report["copy_to_device"]
    assert audit.total("sync") == 4, report["sync"]
    assert all("search.py" in where for where in report["sync"])
    np.testing.assert_array_equal(got[1], search_all(queries, corpus, 20, "cosine")[1])


def _peak_allocated(run):
    """The most bytes torch held at once while run() ran, from the profiler's allocation events."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = run()
    marks = []
    for event in prof.events():
        change = event.cpu_memory_usage if event.name == "[memory]" else event.self_cpu_memory_usage
        if change:
            marks.append((event.time_range.start, change))
    held = peak = 0
    for _, change in sorted(marks):
        held += change
        peak = max(peak, held)
    assert held == 0  # every allocation seen was freed: the events are complete
    return peak, result


@pytest.mark.parametrize("order", ["random", "rising"])
@pytest.mark.parametrize("filtered", [False, True])
def test_allocations_stay_within_the_plan(order, filtered):
    """What torch allocates during a search (the reader's pieces are numpy views here) stays within
    the plan's bytes, for tight and loose budgets, also when every corpus block beats the last
    ("rising": the CPU filter finds too many candidates and falls back). Measured: 78-94% of it."""
    rng = np.random.default_rng(8)
    queries = rng.normal(size=(300, 32)).astype(np.float32)
    corpus = rng.normal(size=(12000, 32)).astype(np.float32)
    if order == "rising":  # scores grow with the row: the best rows come last
        queries[:, 0] += 5
        corpus[:, 0] += np.linspace(0, 20, len(corpus), dtype=np.float32)
    for budget in (2 << 20, 8 << 20, 64 << 20):
        plan = search.plan_search(300, 32, 100, 12000, budget, filtered=filtered)
        peak, (_, rows) = _peak_allocated(
            lambda budget=budget: search.top_k(queries, reader(corpus), 12000, 100, "dot", budget, filtered=filtered)
        )
        assert 0 < peak <= plan.bytes <= budget, (plan, peak)
        if order == "rising":
            assert rows[:, 0].min() > 11000


@pytest.mark.parametrize("similarity", KINDS)
def test_reading_only_the_candidates_rows_changes_nothing(similarity):
    """Few queries in a large corpus: with read_rows the exact re-scoring reads only its candidates'
    rows (fewer than half the corpus), not the corpus again; scores and rows are the same bit for
    bit, tie-heavy vectors included, and what torch allocates stays within the plan."""
    rng = np.random.default_rng(11)
    corpus = exact_vectors(rng, 20000, 16, similarity)
    queries = exact_vectors(rng, 5, 16, similarity)
    k = 60
    for budget in (1 << 20, 1 << 30):
        ranges, listed = [], []

        def read_rows(rows, listed=listed):
            assert np.all(np.diff(rows) > 0)
            listed.append(len(rows))
            return corpus[rows]

        peak, got = _peak_allocated(
            lambda budget=budget, ranges=ranges, read_rows=read_rows: search.top_k(
                queries, reader(corpus, ranges), 20000, k, similarity, budget, read_rows=read_rows
            )
        )
        want = search.top_k(queries, reader(corpus), 20000, k, similarity, budget)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert sum(b - a for a, b in ranges) == 20000  # the float32 pass, once; not the re-scoring
        assert 0 < sum(listed) <= 5 * (k + search.margin(k))
        plan = search.plan_search(5, 16, k, 20000, budget, listed=True)
        assert peak <= plan.bytes <= budget, (plan, peak)


def reusing_reader(corpus):
    """read_corpus and read_rows writing every piece into one array (read_corpus's contract lets a
    reader reuse it): a search that held a piece past its next read would see other rows."""
    buffer = np.empty_like(corpus)

    def read(start, stop):
        out = buffer[: stop - start]
        out[...] = corpus[start:stop]
        return out

    def read_rows(rows):
        out = buffer[: len(rows)]
        out[...] = corpus[rows]
        return out

    return read, read_rows


@pytest.mark.parametrize("filtered", [False, True])
def test_a_reader_reusing_its_array_changes_nothing(filtered):
    """Pieces read into one reused array give the results of fresh arrays: in one block and many,
    re-scoring by ranges and by listed rows, and the exhaustive scoring of queries among thousands
    of equal scores."""
    rng = np.random.default_rng(29)
    corpus = rng.integers(-3, 4, size=(9000, 16)).astype(np.float32)
    corpus[4000:7000] = corpus[0] * 2
    queries = np.concatenate([corpus[:1] * 3, rng.integers(-3, 4, size=(7, 16)).astype(np.float32)])
    for budget in (150_000, 1 << 30):
        for listed in (False, True):
            read, read_rows = reusing_reader(corpus)
            got = search.top_k(
                queries, read, 9000, 20, "dot", budget, filtered=filtered, read_rows=read_rows if listed else None
            )
            want = search_all(queries, corpus, 20, "dot", budget, filtered=filtered)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])


def test_many_candidates_on_few_rows_are_read_by_their_rows():
    """More candidate pairs than rows, all on a few rows (a hub every query is near): the distinct
    rows are counted per row, only they are read by the re-scoring, and the results are the same."""
    rng = np.random.default_rng(23)
    corpus = rng.normal(size=(4000, 16)).astype(np.float32)
    corpus[:900, 0] += 40  # the hub
    queries = rng.normal(size=(100, 16)).astype(np.float32)
    queries[:, 0] += 40
    listed = []

    def read_rows(rows):
        listed.append(len(rows))
        return corpus[rows]

    k = 60
    got = search.top_k(queries, reader(corpus), 4000, k, "cosine", read_rows=read_rows)
    want = search.top_k(queries, reader(corpus), 4000, k, "cosine")
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].max() < 900 and 100 * (k + search.margin(k)) > 2000
    assert 0 < sum(listed) <= 900


@pytest.mark.parametrize("k", [1, 20])
def test_thousands_of_copies_and_small_k(k):
    """A run of 3000 copies of one query's best vector (equal scores across many blocks: the lowest
    rows win), and small k (blocks where nothing can enter): the CPU filter takes its fallbacks and
    the results equal the brute force's."""
    rng = np.random.default_rng(9)
    queries = rng.integers(-3, 4, size=(8, 16)).astype(np.float32)
    corpus = rng.integers(-3, 4, size=(9000, 16)).astype(np.float32)
    corpus[4000:7000] = queries[0] * 2
    scores, order = brute_force(queries, corpus, k, "dot")
    budget = 150_000
    plan = search.plan_search(8, 16, k, 9000, budget)
    assert plan.corpus_block <= 2048 and plan.pending
    got, rows = search_all(queries, corpus, k, "dot", budget)
    np.testing.assert_array_equal(rows, order)
    np.testing.assert_array_equal(got, np.take_along_axis(scores, order, axis=1).astype(np.float32))
    assert rows[0].tolist() == list(range(4000, 4000 + k))


def hashed_word_counts(rng, n, d, vocabulary=2000, words=(1, 4)):
    """Bags of words hashed into d buckets (counts): most pairs share no word (a true 0 cosine), many
    share one, and equal similarities abound."""
    out = np.zeros((n, d), dtype=np.float32)
    for row in out:
        for word in rng.integers(0, vocabulary, int(rng.integers(words[0], words[1] + 1))):
            row[zlib.crc32(f"w{word}".encode()) % d] += 1
    return out


def exact_ranking(queries, corpus, k, similarity):
    """The search's documented result, from the exact integer arithmetic of numpy: float32 of the
    exact score (cosine: sign(p) * sqrt(p^2 / (|q|^2 |x|^2)), one rounding of a ratio of integers),
    ranked by that score, then by row."""
    q, c = queries.astype(np.int64), corpus.astype(np.int64)
    dot = (q @ c.T).astype(np.float64)
    if similarity == "cosine":
        norms = np.outer((q * q).sum(1), (c * c).sum(1)).astype(np.float64)
        dot = np.sign(dot) * np.sqrt(dot * dot / np.maximum(norms, 1e-48))
    scores = dot.astype(np.float32)
    rows = np.lexsort((np.broadcast_to(np.arange(len(corpus)), scores.shape), -scores), axis=1)[:, :k]
    return np.take_along_axis(scores, rows, axis=1), rows


@pytest.mark.parametrize("similarity", KINDS)
def test_tie_heavy_vectors_give_the_same_results_for_any_blocks(similarity):
    """Hashed word counts with duplicated rows (most similarities exactly 0 or exactly equal to
    others): every budget, shard split and selection returns the exact ranking, bit for bit, with
    the tie rule applied to mathematically equal similarities."""
    rng = np.random.default_rng(11)
    base = hashed_word_counts(rng, 1500, 512)
    corpus = np.concatenate([base, base[rng.choice(1500, 900)]])[rng.permutation(2400)]
    queries = hashed_word_counts(rng, 25, 512, words=(1, 3))
    k = 60
    expected = exact_ranking(queries, corpus, k, similarity)
    assert (expected[0] == 0).mean() > 0.2 and (expected[0][:, :-1] == expected[0][:, 1:]).mean() > 0.5
    runs = {
        "one block": search_all(queries, corpus, k, similarity),
        "grouped": search_all(queries, corpus, k, similarity, filtered=False),
        "tight budget": search_all(queries, corpus, k, similarity, 1_500_000),
    }
    for cuts in ((0, 700, 2400), (0, 333, 1000, 1001, 2400)):
        parts = [
            search.top_k(queries, reader(corpus), len(corpus), k, similarity, 2_000_000, rows=(a, b))
            for a, b in zip(cuts, cuts[1:])
        ]
        runs[f"shards {cuts}"] = search.merge_top_k(parts, k)
    for name, (scores, rows) in runs.items():
        np.testing.assert_array_equal(rows, expected[1], err_msg=name)
        np.testing.assert_array_equal(scores, expected[0], err_msg=name)


@pytest.mark.parametrize("filtered", [False, True])
def test_rescoring_restores_the_thread_count(filtered):
    """The re-scoring runs the device path's small operations on one thread (the CPU's sampled
    products on its fair share) and gives torch its thread count back, also when reading the corpus
    fails part way."""
    rng = np.random.default_rng(5)
    queries = rng.normal(size=(8, 16)).astype(np.float32)
    corpus = rng.normal(size=(3000, 16)).astype(np.float32)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []

        def read(start, stop):
            seen.append((start, torch.get_num_threads()))
            return corpus[start:stop]

        search.top_k(queries, read, len(corpus), 10, "cosine", 1 << 20, filtered=filtered)
        assert torch.get_num_threads() == 2 and seen[0] == (0, 2)
        rescoring = seen[[start for start, _ in seen].index(0, 1) :]  # the second pass over the rows
        if not filtered:
            assert {count for _, count in rescoring} == {1}
        reads = []

        def failing(start, stop):
            reads.append(start)
            if reads.count(0) == 2:
                raise OSError("disk gone")
            return corpus[start:stop]

        with pytest.raises(OSError):
            search.top_k(queries, failing, len(corpus), 10, "cosine", 1 << 20, filtered=filtered)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("similarity", KINDS)
def test_sampled_products_equal_gathered_rows_bit_for_bit(similarity):
    """The re-scoring's two ways to the candidates' integer dot products (the CPU's sampled matrix
    product, the device path's gathered rows) give the same exact scores, on random and on
    tie-heavy vectors, with pieces and pair chunks smaller than a query's candidates."""
    rng = np.random.default_rng(17)
    for corpus, queries in (
        (rng.normal(size=(5000, 48)).astype(np.float32), rng.normal(size=(70, 48)).astype(np.float32)),
        (hashed_word_counts(rng, 3000, 256), hashed_word_counts(rng, 40, 256, words=(1, 3))),
    ):
        n, d = corpus.shape
        raw = torch.from_numpy(queries)
        found = torch.stack([torch.from_numpy(rng.choice(n, 300, replace=False)) for _ in range(len(queries))])
        for pairs, pieces in ((1 << 16, 1024), (97, 250)):
            plan = search.Plan(len(queries), 64, 4096, 1, 0, 1024, 0, 300, pairs, pieces)
            got = {
                sampled: search._rescore(
                    raw,
                    found,
                    reader(corpus),
                    0,
                    n,
                    plan,
                    similarity,
                    search._Upload(pieces, d, raw.device),
                    sampled=sampled,
                )
                for sampled in (False, True)
            }
            assert torch.equal(got[True], got[False]), (similarity, pairs, pieces)
    # The counts are integers: numpy's integer arithmetic gives every pair's exact score.
    q, c = queries.astype(np.int64), corpus.astype(np.int64)
    rows = found.numpy()
    dot = np.einsum("qd,qwd->qw", q, c[rows]).astype(np.float64)
    if similarity == "cosine":
        norms = (q * q).sum(1)[:, None] * (c * c).sum(1)[rows]
        dot = np.sign(dot) * np.sqrt(dot * dot / np.maximum(norms.astype(np.float64), 1e-48))
    np.testing.assert_array_equal(got[True].to(torch.float32).numpy(), dot.astype(np.float32))


def test_scaling_by_powers_of_two_equals_ldexp_over_the_float32_range():
    """The exact re-scoring's integers scale each row by a power of two with one multiplication (in
    float32 on the host's paths when no bit can be lost, else in float64): the same values as
    torch.ldexp for vectors from the smallest subnormal to the largest float32, zero rows included."""
    rng = np.random.default_rng(13)
    bits = search._bits(384)
    for scale in (1e-44, 1e-30, 1e-6, 1.0, 1e6, 1e30, 3e38):
        big = np.finfo(np.float32).max
        x = torch.as_tensor(np.clip(rng.standard_normal((300, 384)) * scale, -big, big).astype(np.float32))
        x[0] = 0
        x[1, :5] = 1e-45
        wide = x.to(torch.float64)
        _, exponent = torch.frexp(wide.abs().amax(dim=1))
        want = torch.ldexp(wide, (bits - exponent).unsqueeze(1)).round_()
        for host in (False, True):  # in float64; in float32 where every row is scaled up
            got, got_exponent = search._integers(x, bits, host)
            assert torch.equal(got, want) and torch.equal(got_exponent, exponent), (scale, host)
        norms = torch.ldexp((want * want).sum(dim=1), 2 * (exponent - bits))
        assert torch.equal(search._squared_norms(got, exponent, bits), norms), scale


def test_the_margin_widens_with_the_error_bound():
    """Up to 384 dimensions the margin is max(16, k // 32); beyond, it grows as the float32 error
    bound does (at 1024 dimensions a fixed margin left 84 of 1,000 queries of a 225,621-row corpus
    of random vectors to be searched again)."""
    assert search.margin(1000, 16) == search.margin(1000, 384) == 31 and search.margin(10, 384) == 16
    widths = [search.margin(1000, d) for d in (384, 512, 768, 1024, 4096)]
    assert widths == sorted(widths) and widths[-1] > widths[0]
    ratio = search._bound_unit(1024) / search._bound_unit(384)
    assert search.margin(1000, 1024) == int(np.ceil(31 * ratio))
