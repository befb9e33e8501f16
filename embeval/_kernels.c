/* Compiled kernels of the bootstrap (embeval.stats): the values of its numpy paths at a fraction of
 * the cost per resample; bit for bit, but for Pearson's float sums in scores_sums (added in another
 * order: the same to about 1e-15). Built at install where a C compiler (GCC or Clang) is; without it,
 * embeval.stats computes the same figures in numpy.
 *
 * Every function takes C-contiguous buffers (numpy arrays), checks their sizes, and releases the GIL
 * while it computes, so that blocks of resamples are computed side by side on threads.
 *
 *   draw_pcg64(...): Generator(PCG64).integers(0, n, dtype=uint32)'s draws and the generator's next
 *       state (numpy's algorithm, checked against numpy by embeval.stats before it is used).
 *   counts(draws, kind, rows, n, out): out (rows, n) float64 = how many times each of n items is
 *       in each row of draws (rows, n); kind "I" (uint32) or "q" (int64) draws.
 *   spearman_sums(W, rows, n, x_items, x_fresh, y_fresh, x_place_of_y, out): for each resample (row of
 *       the float64 counts W (rows, n)) and the k items of a set (x_items: their indices in ascending
 *       x, x_fresh[p] = 1 where a run of equal x begins, y_fresh the same in ascending y, and
 *       x_place_of_y[q]: the place in x's order of y's q-th item), the three integer sums of
 *       Spearman's rho from the doubled centred mid-ranks t (mid-rank - (m + 1) / 2, doubled):
 *       out[0] = sum(w tx ty), out[1] = sum over x's runs of c tx^2, out[2] = the same for y,
 *       out[3] = m (the resample's count of the set's items); all exact integers in int64, written as
 *       float64 (exact below 2^53: sets of at most 2^17 items).
 *   scores_sums(draws, kind, rows, n, place, x_fresh, y_fresh, x_place_of_y, design, out): for each
 *       resample (row of draws (rows, n) of a set of n items) Spearman's four values (as spearman_sums)
 *       and Pearson's eight sums (the counts times design's columns), counted straight from the draws:
 *       place[i] the place of item i in ascending x, x_fresh, y_fresh and x_place_of_y as above,
 *       design (n, 8) in x's order; out (rows, 12).
 *   row_sums(draws, kind, rows, n, pointers, members, scores, heights, out): for each resample (row of
 *       draws) and each of `scores` groupings of the n items into rows (heights[s] rows; an item may be
 *       in more than one row), the count of the resample's draws in each row, as float32 (exact: fewer
 *       than 2^24 items): the rows' members listed row by row (members, int32, the groupings in turn)
 *       from pointers (int64, heights[s] + 1 of them per grouping, into the grouping's members); out
 *       holds each grouping's (rows, heights[s]) block in turn.
 *   pair_figures(sums, rows, height, k, first, negative_only, out): for each resample, a pair
 *       classification score's figures from its row sums (row_sums' block of one grouping, float32
 *       (rows, height), height = 2 k + 1 + first: k positive runs' positives, the k + 1 stretches'
 *       negatives, the first runs' pairs): out (rows, 4) float64 = the best accuracy, the best F1, the
 *       average precision and 1 where one of the first runs is present (embeval.evaluate.pair_scores'
 *       figures_of_sums; the same values, but for the average precision's sum, added in order).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int check_size(Py_buffer *view, Py_ssize_t items, Py_ssize_t itemsize, const char *what)
{
    if (view->len != items * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, expected %zd", what, view->len, items * itemsize);
        return -1;
    }
    return 0;
}

static PyObject *counts(PyObject *self, PyObject *args)
{
    Py_buffer draws, out;
    int kind;
    Py_ssize_t rows, n;
    if (!PyArg_ParseTuple(args, "y*Cnnw*", &draws, &kind, &rows, &n, &out))
        return NULL;
    Py_ssize_t width = kind == 'I' ? 4 : 8;
    int bad = 0;
    if ((kind != 'I' && kind != 'q') || rows < 0 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "counts: kind must be 'I' or 'q', rows and n at least 0");
        bad = 1;
    }
    if (!bad && (check_size(&draws, rows * n, width, "counts' draws") || check_size(&out, rows * n, 8, "counts' out")))
        bad = 1;
    Py_ssize_t outside = 0;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        double *o = (double *)out.buf;
        memset(o, 0, (size_t)(rows * n) * sizeof(double));
        for (Py_ssize_t r = 0; r < rows; r++) {
            double *row = o + r * n;
            if (kind == 'I') {
                const uint32_t *d = (const uint32_t *)draws.buf + r * n;
                for (Py_ssize_t i = 0; i < n; i++) {
                    if ((Py_ssize_t)d[i] < n)
                        row[d[i]] += 1.0;
                    else
                        outside++;
                }
            } else {
                const int64_t *d = (const int64_t *)draws.buf + r * n;
                for (Py_ssize_t i = 0; i < n; i++) {
                    if (d[i] >= 0 && d[i] < n)
                        row[d[i]] += 1.0;
                    else
                        outside++;
                }
            }
        }
        Py_END_ALLOW_THREADS
        if (outside) {
            PyErr_Format(PyExc_ValueError, "counts: %zd draws outside 0..%zd", outside, n - 1);
            bad = 1;
        }
    }
    PyBuffer_Release(&draws);
    PyBuffer_Release(&out);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

/* A place in x's order during one resample: its count w and its run's doubled mid-rank u. */
typedef struct {
    int32_t w, u;
} slot;

/* y's pass over the slots x's pass wrote (each place's count w and doubled mid-rank u in x's order),
 * read in y's order through x_place_of_y, its runs where y_fresh is 1; then the sums centred on the
 * mean doubled rank m (sum(c u) = m^2 on each side, sum(w) = m), written at out[0], out[stride],
 * out[2 stride], out[3 stride]: sum(w tx ty), x's and y's sum(c t^2), m. */
static inline void y_pass(const slot *xs, const int64_t *x_place_of_y, const uint8_t *y_fresh, Py_ssize_t k, int64_t m,
                          int64_t sx, double *out, Py_ssize_t stride)
{
    int64_t below = 0, sy = 0, cross = 0;
    for (Py_ssize_t p = 0; p < k;) {
        slot first = xs[x_place_of_y[p]];
        int64_t c = first.w, wu = (int64_t)first.w * first.u;
        Py_ssize_t end = p + 1;
        while (end < k && !y_fresh[end]) {
            slot next = xs[x_place_of_y[end++]];
            c += next.w;
            wu += (int64_t)next.w * next.u;
        }
        int64_t u = 2 * below + c;
        sy += c * u * u;
        cross += wu * u;
        below += c;
        p = end;
    }
    int64_t cube = m * m * m;
    out[0] = (double)(cross - cube);
    out[stride] = (double)(sx - cube);
    out[2 * stride] = (double)(sy - cube);
    out[3 * stride] = (double)m;
}

/* One resample's sums over a set of k items (see spearman_sums), w the resample's counts of the set's n
 * items, xs k slots (scratch). x's pass writes each item's count and doubled mid-rank
 * u = 2 (count below its run) + (its run's count) in x order; y's pass reads them through y's order. */
static void resample_sums(const double *w, const int64_t *x_items, const uint8_t *x_fresh, const uint8_t *y_fresh,
                          const int64_t *x_place_of_y, Py_ssize_t k, slot *xs, double *out, Py_ssize_t stride)
{
    int64_t below = 0, sx = 0;
    if (x_fresh == NULL) { /* no ties in x: each item its own run */
        for (Py_ssize_t p = 0; p < k; p++) {
            int64_t c = (int64_t)w[x_items[p]], u = 2 * below + c;
            sx += c * u * u;
            xs[p].w = (int32_t)c;
            xs[p].u = (int32_t)u;
            below += c;
        }
    }
    else {
        for (Py_ssize_t p = 0; p < k; p++)
            xs[p].w = (int32_t)w[x_items[p]];
    }
    for (Py_ssize_t p = 0; x_fresh != NULL && p < k;) {
        Py_ssize_t end = p + 1;
        int64_t c = xs[p].w;
        while (end < k && !x_fresh[end])
            c += xs[end++].w;
        int64_t u = 2 * below + c;
        sx += c * u * u;
        for (Py_ssize_t q = p; q < end; q++)
            xs[q].u = (int32_t)u;
        below += c;
        p = end;
    }
    y_pass(xs, x_place_of_y, y_fresh, k, below, sx, out, stride);
}

static PyObject *spearman_sums(PyObject *self, PyObject *args)
{
    Py_buffer W, x_items, x_fresh, y_fresh, x_place_of_y, out;
    Py_ssize_t rows, n;
    if (!PyArg_ParseTuple(args, "y*nny*y*y*y*w*", &W, &rows, &n, &x_items, &x_fresh, &y_fresh, &x_place_of_y, &out))
        return NULL;
    Py_ssize_t k = x_items.len / 8;
    int bad = rows < 0 || n < 0 || n > ((Py_ssize_t)1 << 17) || k > n;
    if (bad)
        PyErr_SetString(PyExc_ValueError, "spearman_sums: at most 2^17 items, of a set of n");
    if (!bad && (check_size(&W, rows * n, 8, "spearman_sums' counts") || check_size(&x_items, k, 8, "x_items") ||
                 check_size(&x_fresh, k, 1, "x_fresh") || check_size(&y_fresh, k, 1, "y_fresh") ||
                 check_size(&x_place_of_y, k, 8, "x_place_of_y") || check_size(&out, 4 * rows, 8, "spearman_sums' out")))
        bad = 1;
    if (!bad) {
        const int64_t *xi = (const int64_t *)x_items.buf, *yx = (const int64_t *)x_place_of_y.buf;
        for (Py_ssize_t p = 0; p < k && !bad; p++)
            bad = xi[p] < 0 || xi[p] >= n || yx[p] < 0 || yx[p] >= k;
        if (bad)
            PyErr_SetString(PyExc_ValueError, "spearman_sums: an item outside the set");
    }
    slot *xs = NULL;
    if (!bad) {
        xs = (slot *)malloc((size_t)(k > 0 ? k : 1) * sizeof(slot));
        if (xs == NULL) {
            PyErr_NoMemory();
            bad = 1;
        }
    }
    if (!bad) {
        const uint8_t *xf = (const uint8_t *)x_fresh.buf;
        Py_ssize_t runs = 0;
        for (Py_ssize_t p = 0; p < k; p++)
            runs += xf[p] != 0;
        if (runs == k)
            xf = NULL;
        Py_BEGIN_ALLOW_THREADS
        const double *counts = (const double *)W.buf;
        double *o = (double *)out.buf;
        for (Py_ssize_t r = 0; r < rows; r++)
            resample_sums(counts + r * n, (const int64_t *)x_items.buf, xf,
                          (const uint8_t *)y_fresh.buf, (const int64_t *)x_place_of_y.buf, k, xs, o + r, rows);
        Py_END_ALLOW_THREADS
    }
    free(xs);
    PyBuffer_Release(&W);
    PyBuffer_Release(&x_items);
    PyBuffer_Release(&x_fresh);
    PyBuffer_Release(&y_fresh);
    PyBuffer_Release(&x_place_of_y);
    PyBuffer_Release(&out);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

/* One resample's draws (n of them, kind 'I' uint32 or 'q' int64) counted into counts (n int32, zeroed
 * here), each at place[draw] (place NULL: at the draw itself). Returns the number of draws outside
 * 0..n-1 (not counted). Inline: a NULL place folds away where the caller passes it. */
static inline Py_ssize_t count_draws(const void *draws, int kind, Py_ssize_t n, const int64_t *place, int32_t *counts)
{
    Py_ssize_t outside = 0;
    memset(counts, 0, (size_t)n * sizeof(int32_t));
    if (kind == 'I') {
        const uint32_t *d = (const uint32_t *)draws;
        for (Py_ssize_t i = 0; i < n; i++) {
            if ((Py_ssize_t)d[i] < n)
                counts[place != NULL ? place[d[i]] : (int64_t)d[i]]++;
            else
                outside++;
        }
    } else {
        const int64_t *d = (const int64_t *)draws;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (d[i] >= 0 && d[i] < n)
                counts[place != NULL ? place[d[i]] : d[i]]++;
            else
                outside++;
        }
    }
    return outside;
}

/* Two doubles added and multiplied at once (GCC's and Clang's vector extension; one SSE2 register on
 * x86-64): Pearson's sums four such pairs at a time. */
typedef double pair_of_doubles __attribute__((vector_size(16)));

/* One resample of a scores set from its draws: the counts in x's order, Spearman's sums (as
 * spearman_sums: x's pass writes each place's count and doubled mid-rank, y's pass reads them in y's
 * order) and Pearson's eight sums (the counts times the design's rows, in x's order, two places at a
 * time into two partial sums). Returns the number of draws outside the set (then nothing is summed). */
static Py_ssize_t scores_resample(const void *draws, int kind, Py_ssize_t n, const int64_t *place,
                                  const uint8_t *x_fresh, const uint8_t *y_fresh, const int64_t *x_place_of_y,
                                  const double *design, int32_t *counts, slot *xs, double *out)
{
    Py_ssize_t outside = count_draws(draws, kind, n, place, counts);
    if (outside)
        return outside;
    double sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t below = 0, sx = 0;
    Py_ssize_t p = 0;
    if (x_fresh == NULL) { /* no ties in x: each place its own run, two places at a time */
        pair_of_doubles even[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, odd[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}};
        for (; p + 1 < n; p += 2) {
            int64_t c = counts[p], u = 2 * below + c;
            int64_t c2 = counts[p + 1], u2 = u + c + c2;
            sx += c * u * u + c2 * u2 * u2;
            xs[p].w = (int32_t)c;
            xs[p].u = (int32_t)u;
            xs[p + 1].w = (int32_t)c2;
            xs[p + 1].u = (int32_t)u2;
            below += c + c2;
            const double *row = design + 8 * p;
            pair_of_doubles weight = {(double)c, (double)c}, weight2 = {(double)c2, (double)c2};
            for (int j = 0; j < 4; j++) {
                pair_of_doubles a, b;
                memcpy(&a, row + 2 * j, sizeof a);
                memcpy(&b, row + 8 + 2 * j, sizeof b);
                even[j] += weight * a;
                odd[j] += weight2 * b;
            }
        }
        for (int j = 0; j < 4; j++) {
            sums[2 * j] = even[j][0] + odd[j][0];
            sums[2 * j + 1] = even[j][1] + odd[j][1];
        }
    }
    while (p < n) {
        Py_ssize_t end = p + 1;
        int64_t c = counts[p];
        if (x_fresh != NULL)
            while (end < n && !x_fresh[end])
                c += counts[end++];
        int64_t u = 2 * below + c;
        sx += c * u * u;
        for (Py_ssize_t q = p; q < end; q++) {
            xs[q].w = counts[q];
            xs[q].u = (int32_t)u;
            const double *row = design + 8 * q, weight = (double)counts[q];
            for (int j = 0; j < 8; j++)
                sums[j] += weight * row[j];
        }
        below += c;
        p = end;
    }
    y_pass(xs, x_place_of_y, y_fresh, n, below, sx, out, 1);
    for (int j = 0; j < 8; j++)
        out[4 + j] = sums[j];
    return 0;
}

static PyObject *scores_sums(PyObject *self, PyObject *args)
{
    Py_buffer draws, place, x_fresh, y_fresh, x_place_of_y, design, out;
    int kind;
    Py_ssize_t rows, n;
    if (!PyArg_ParseTuple(args, "y*Cnny*y*y*y*y*w*", &draws, &kind, &rows, &n, &place, &x_fresh, &y_fresh,
                          &x_place_of_y, &design, &out))
        return NULL;
    Py_ssize_t width = kind == 'I' ? 4 : 8;
    int bad = (kind != 'I' && kind != 'q') || rows < 0 || n < 0 || n > ((Py_ssize_t)1 << 17);
    if (bad)
        PyErr_SetString(PyExc_ValueError, "scores_sums: kind 'I' or 'q', at most 2^17 items");
    if (!bad && (check_size(&draws, rows * n, width, "scores_sums' draws") || check_size(&place, n, 8, "place") ||
                 check_size(&x_fresh, n, 1, "x_fresh") || check_size(&y_fresh, n, 1, "y_fresh") ||
                 check_size(&x_place_of_y, n, 8, "x_place_of_y") || check_size(&design, 8 * n, 8, "design") ||
                 check_size(&out, 12 * rows, 8, "scores_sums' out")))
        bad = 1;
    if (!bad) {
        const int64_t *pl = (const int64_t *)place.buf, *yx = (const int64_t *)x_place_of_y.buf;
        for (Py_ssize_t i = 0; i < n && !bad; i++)
            bad = pl[i] < 0 || pl[i] >= n || yx[i] < 0 || yx[i] >= n;
        if (bad)
            PyErr_SetString(PyExc_ValueError, "scores_sums: a place outside the set");
    }
    int32_t *counts = NULL;
    slot *xs = NULL;
    if (!bad) {
        counts = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
        xs = (slot *)malloc((size_t)(n > 0 ? n : 1) * sizeof(slot));
        if (counts == NULL || xs == NULL) {
            PyErr_NoMemory();
            bad = 1;
        }
    }
    if (!bad) {
        const uint8_t *xf = (const uint8_t *)x_fresh.buf;
        Py_ssize_t starts = 0;
        for (Py_ssize_t p = 0; p < n; p++)
            starts += xf[p] != 0;
        if (starts == n)
            xf = NULL;
        Py_ssize_t outside = 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows && !outside; r++)
            outside = scores_resample((const char *)draws.buf + r * n * width, kind, n, (const int64_t *)place.buf, xf,
                                      (const uint8_t *)y_fresh.buf, (const int64_t *)x_place_of_y.buf,
                                      (const double *)design.buf, counts, xs, (double *)out.buf + 12 * r);
        Py_END_ALLOW_THREADS
        if (outside) {
            PyErr_Format(PyExc_ValueError, "scores_sums: draws outside 0..%zd", n - 1);
            bad = 1;
        }
    }
    free(counts);
    free(xs);
    PyBuffer_Release(&draws);
    PyBuffer_Release(&place);
    PyBuffer_Release(&x_fresh);
    PyBuffer_Release(&y_fresh);
    PyBuffer_Release(&x_place_of_y);
    PyBuffer_Release(&design);
    PyBuffer_Release(&out);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

#ifdef __SIZEOF_INT128__
/* numpy's PCG64 (O'Neill's PCG XSL RR 128/64: the state advanced, then its output), its 32-bit values
 * (each 64-bit output gives its low half, then, on the next call, its high half), and numpy's bounded
 * draw of 32-bit integers (Lemire's multiply with rejection): the same values as
 * Generator.integers(0, n, dtype=uint32), leaving the generator in the same state. */
typedef struct {
    unsigned __int128 state, inc;
    int has_uint32;
    uint32_t uinteger;
} pcg64;

static inline uint32_t pcg64_next32(pcg64 *g)
{
    if (g->has_uint32) {
        g->has_uint32 = 0;
        return g->uinteger;
    }
    const unsigned __int128 multiplier = ((unsigned __int128)0x2360ED051FC65DA4ULL << 64) | 0x4385DF649FCCF645ULL;
    g->state = g->state * multiplier + g->inc;
    uint64_t value = (uint64_t)(g->state >> 64) ^ (uint64_t)g->state;
    unsigned rot = (unsigned)(g->state >> 122);
    uint64_t next = (value >> rot) | (value << ((64 - rot) & 63));
    g->has_uint32 = 1;
    g->uinteger = (uint32_t)(next >> 32);
    return (uint32_t)(next & 0xffffffffULL);
}

static PyObject *draw_pcg64(PyObject *self, PyObject *args)
{
    unsigned long long state_hi, state_lo, inc_hi, inc_lo, uinteger, n;
    int has_uint32;
    Py_buffer out;
    if (!PyArg_ParseTuple(args, "KKKKiKKw*", &state_hi, &state_lo, &inc_hi, &inc_lo, &has_uint32, &uinteger, &n, &out))
        return NULL;
    if (n < 1 || n > 0xFFFFFFFFULL || out.len % 4) {
        PyBuffer_Release(&out);
        PyErr_SetString(PyExc_ValueError, "draw_pcg64: n must be 1 to 2^32 - 1, out uint32");
        return NULL;
    }
    pcg64 g = {((unsigned __int128)state_hi << 64) | state_lo, ((unsigned __int128)inc_hi << 64) | inc_lo,
               has_uint32 != 0, (uint32_t)uinteger};
    uint32_t *o = (uint32_t *)out.buf;
    Py_ssize_t count = out.len / 4;
    const uint32_t range = (uint32_t)(n - 1), bound = (uint32_t)n;
    Py_BEGIN_ALLOW_THREADS
    if (range == 0) {
        memset(o, 0, (size_t)count * 4);
    } else {
        const uint32_t threshold = (UINT32_MAX - range) % bound;
        for (Py_ssize_t i = 0; i < count; i++) {
            uint64_t m = (uint64_t)pcg64_next32(&g) * bound;
            uint32_t leftover = (uint32_t)m;
            if (leftover < bound) {
                while (leftover < threshold) {
                    m = (uint64_t)pcg64_next32(&g) * bound;
                    leftover = (uint32_t)m;
                }
            }
            o[i] = (uint32_t)(m >> 32);
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&out);
    return Py_BuildValue("KKiK", (unsigned long long)(g.state >> 64), (unsigned long long)g.state, g.has_uint32,
                         (unsigned long long)g.uinteger);
}
#endif

/* Each resample's draws counted per item (int32, reused), then each grouping's rows summed from the
 * counts of their members (gathered in the rows' order, added in a register): no float increments
 * scattered over memory, no counts matrix. */
static PyObject *row_sums(PyObject *self, PyObject *args)
{
    Py_buffer draws, pointers, members, heights, out;
    int kind;
    Py_ssize_t rows, n, scores;
    if (!PyArg_ParseTuple(args, "y*Cnny*y*ny*w*", &draws, &kind, &rows, &n, &pointers, &members, &scores, &heights,
                          &out))
        return NULL;
    Py_ssize_t width = kind == 'I' ? 4 : 8;
    int bad = (kind != 'I' && kind != 'q') || rows < 0 || n < 0 || n >= ((Py_ssize_t)1 << 24) || scores < 1;
    if (bad)
        PyErr_SetString(PyExc_ValueError, "row_sums: kind 'I' or 'q', fewer than 2^24 items, a grouping at least");
    if (!bad && (check_size(&draws, rows * n, width, "row_sums' draws") || check_size(&heights, scores, 8, "heights")))
        bad = 1;
    const int64_t *h = (const int64_t *)heights.buf, *ptr = (const int64_t *)pointers.buf;
    const int32_t *mem = (const int32_t *)members.buf;
    Py_ssize_t total = 0, starts = 0;
    for (Py_ssize_t s = 0; !bad && s < scores; s++) {
        bad = h[s] < 0;
        total += rows * h[s];
        starts += h[s] + 1;
    }
    if (!bad && (check_size(&pointers, starts, 8, "pointers") || check_size(&out, total, 4, "row_sums' out")))
        bad = 1;
    Py_ssize_t count = members.len / 4;
    for (Py_ssize_t s = 0, at = 0; !bad && s < scores; at += h[s] + 1, s++)
        for (Py_ssize_t q = 0; !bad && q < h[s]; q++)
            bad = ptr[at + q] < 0 || ptr[at + q] > ptr[at + q + 1] || ptr[at + q + 1] > count;
    for (Py_ssize_t j = 0; !bad && j < count; j++)
        bad = mem[j] < 0 || mem[j] >= n;
    if (bad && !PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "row_sums: rows' pointers or members outside the set");
    int32_t *c = NULL;
    int32_t *cum = NULL;
    if (!bad) {
        c = (int32_t *)malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
        cum = (int32_t *)malloc((size_t)(count + 1) * sizeof(int32_t));
        if (c == NULL || cum == NULL) {
            PyErr_NoMemory();
            bad = 1;
        }
    }
    Py_ssize_t outside = 0;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        float *o = (float *)out.buf;
        for (Py_ssize_t r = 0; r < rows && !outside; r++) {
            outside = count_draws((const char *)draws.buf + r * n * width, kind, n, NULL, c);
            /* each grouping's members' running count (below 2^24: int32), then each row's as the
               difference of two: no branch per row (rows of a pair or two would mispredict their loops'
               ends); one grouping at a time, so the running counts stay in cache */
            float *block = o;
            const int64_t *p = ptr;
            for (Py_ssize_t s = 0; s < scores; s++) {
                int64_t first = p[0], last = p[h[s]];
                int32_t running = 0;
                for (int64_t j = first; j < last; j++) {
                    cum[j - first] = running;
                    running += c[mem[j]];
                }
                cum[last - first] = running;
                float *row = block + r * h[s];
                for (Py_ssize_t q = 0; q < h[s]; q++)
                    row[q] = (float)(cum[p[q + 1] - first] - cum[p[q] - first]);
                block += rows * h[s];
                p += h[s] + 1;
            }
        }
        Py_END_ALLOW_THREADS
        if (outside) {
            PyErr_Format(PyExc_ValueError, "row_sums: draws outside 0..%zd", n - 1);
            bad = 1;
        }
    }
    free(c);
    free(cum);
    PyBuffer_Release(&draws);
    PyBuffer_Release(&pointers);
    PyBuffer_Release(&members);
    PyBuffer_Release(&heights);
    PyBuffer_Release(&out);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

/* One resample's pair classification figures from its row sums (see pair_figures in the header). */
static void pair_resample(const float *s, Py_ssize_t k, Py_ssize_t first, const uint8_t *negative_only, double *out)
{
    int64_t tp = 0, fp = 0, wanted = 0, unwanted = 0;
    for (Py_ssize_t j = 0; j < k; j++)
        wanted += (int64_t)s[j];
    for (Py_ssize_t j = 0; j <= k; j++)
        unwanted += (int64_t)s[k + j];
    int64_t total = wanted + unwanted, errors = INT64_MAX;
    double gained = 0.0, best = 0.0;
    for (Py_ssize_t j = 0; j < k; j++) {
        int64_t positives = (int64_t)s[j];
        tp += positives;
        fp += (int64_t)s[k + j];
        int64_t taken = tp + fp;
        gained += (double)positives * ((double)tp / (double)(taken > 1 ? taken : 1));
        if (taken > 0 && taken < total) {
            if (fp - tp < errors)
                errors = fp - tp;
            double f1 = (double)tp / (double)(taken + wanted);
            if (f1 > best)
                best = f1;
        }
    }
    double found = 0.0;
    for (Py_ssize_t j = 0; j < first; j++) {
        int64_t count = (int64_t)s[2 * k + 1 + j];
        if (count > 0) {
            found = 1.0;
            if (negative_only[j] && count < total && count < errors)
                errors = count;
            break;
        }
    }
    double accuracy = 0.0;
    if (errors != INT64_MAX) {
        accuracy = (double)(unwanted - errors) / (double)(total > 0 ? total : 1);
        if (!(accuracy > 0.0))
            accuracy = 0.0;
    }
    out[0] = accuracy;
    out[1] = 2 * best;
    out[2] = wanted > 0 ? gained / (double)wanted : 0.0;
    out[3] = found;
}

static PyObject *pair_figures(PyObject *self, PyObject *args)
{
    Py_buffer sums, negative_only, out;
    Py_ssize_t rows, height, k, first;
    if (!PyArg_ParseTuple(args, "y*nnnny*w*", &sums, &rows, &height, &k, &first, &negative_only, &out))
        return NULL;
    int bad = rows < 0 || k < 0 || first < 0 || height != 2 * k + 1 + first;
    if (bad)
        PyErr_SetString(PyExc_ValueError, "pair_figures: height must be 2 k + 1 + first");
    if (!bad && (check_size(&sums, rows * height, 4, "pair_figures' sums") ||
                 check_size(&negative_only, first, 1, "negative_only") || check_size(&out, 4 * rows, 8, "out")))
        bad = 1;
    if (!bad) {
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < rows; r++)
            pair_resample((const float *)sums.buf + r * height, k, first, (const uint8_t *)negative_only.buf,
                          (double *)out.buf + 4 * r);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&sums);
    PyBuffer_Release(&negative_only);
    PyBuffer_Release(&out);
    if (bad)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
#ifdef __SIZEOF_INT128__
    {"draw_pcg64", draw_pcg64, METH_VARARGS,
     "draw_pcg64(state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger, n, out): numpy's PCG64 draws of "
     "integers below n (uint32) into out; returns the generator's new (state_hi, state_lo, has_uint32, uinteger)."},
#endif
    {"counts", counts, METH_VARARGS, "counts(draws, kind, rows, n, out): each row's counts of n items (float64)."},
    {"scores_sums", scores_sums, METH_VARARGS,
     "scores_sums(draws, kind, rows, n, place, x_fresh, y_fresh, x_place_of_y, design, out): Spearman's and "
     "Pearson's sums per resample, from its draws."},
    {"row_sums", row_sums, METH_VARARGS,
     "row_sums(draws, kind, rows, n, pointers, members, scores, heights, out): each resample's counts in the "
     "rows of several groupings of the items (float32)."},
    {"pair_figures", pair_figures, METH_VARARGS,
     "pair_figures(sums, rows, height, k, first, negative_only, out): each resample's best accuracy, best F1, "
     "average precision and whether a first run is present, from its row sums."},
    {"spearman_sums", spearman_sums, METH_VARARGS,
     "spearman_sums(W, rows, n, x_items, x_fresh, y_fresh, x_place_of_y, out): Spearman's sums per resample."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", "embeval's compiled bootstrap kernels.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
