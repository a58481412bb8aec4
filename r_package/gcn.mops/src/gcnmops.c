/* Native helpers of gcn.mops: the per-region work of a run that R's own functions do slowly or with
 * more memory (row names, the count matrix, the label matrix and its inverse), and the allocation of the
 * matrices the engine writes into.
 *
 * Result vectors: ordinary R vectors made by R (allocVector3) whose data block comes from malloc through
 * a custom allocator (R_ext/Rallocators.h). R's garbage collector owns and frees them as any vector, but
 * does not count them in its vector heap, so a run's few large matrices do not each force a full garbage
 * collection to grow that heap (0.4-0.8 s apiece with Bioconductor and reticulate loaded), and their
 * memory is not zero-filled: the engine writes every element.
 */
#include <stdlib.h>
#include <string.h>
#include <R.h>
#include <Rinternals.h>
#include <R_ext/Altrep.h>
#include <R_ext/Rallocators.h>
#include <R_ext/Rdynload.h>

static void *block_alloc(R_allocator_t *allocator, size_t size)
{
    (void) allocator;
    return malloc(size);
}

static void block_free(R_allocator_t *allocator, void *mem)
{
    (void) allocator;
    free(mem);
}

/* copied by R into each vector's block: a static value is enough */
static R_allocator_t block_allocator = {block_alloc, block_free, NULL, NULL};

static SEXP alloc_result(SEXPTYPE type, R_xlen_t length)
{
    /* R's own allocation for small vectors (the custom allocator has a header per vector) */
    if (length < 4096) return allocVector(type, length);
    return allocVector3(type, length, &block_allocator);
}

static void set_dim(SEXP x, SEXP dims)
{
    if (XLENGTH(dims) > 1) setAttrib(x, R_DimSymbol, dims);
}

/* A vector of `type` ("double", "integer", "raw") with dimensions `dims`, not initialized. */
static SEXP gm_alloc(SEXP type, SEXP dims)
{
    static const struct { const char *name; SEXPTYPE type; } types[] = {
        {"double", REALSXP}, {"integer", INTSXP}, {"raw", RAWSXP}};
    if (!isString(type) || XLENGTH(type) != 1) error("'type' must be one string");
    PROTECT(dims = coerceVector(dims, INTSXP));
    R_xlen_t length = 1;
    for (R_xlen_t k = 0; k < XLENGTH(dims); k++) {
        if (INTEGER(dims)[k] == NA_INTEGER || INTEGER(dims)[k] < 0) error("invalid dimensions");
        length *= INTEGER(dims)[k];
    }
    const char *name = CHAR(STRING_ELT(type, 0));
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        if (strcmp(name, types[t].name) == 0) {
            SEXP x = PROTECT(alloc_result(types[t].type, length));
            set_dim(x, dims);
            UNPROTECT(2);
            return x;
        }
    }
    error("unsupported type '%s'", name);
    return R_NilValue; /* not reached */
}

static int valid_count(double v)
{
    return v >= 0 && v < R_PosInf; /* FALSE for NA, NaN, negative and infinite values */
}

/* TRUE when every element of the double vector `x` is a count: >= 0 and finite. */
static SEXP gm_counts_valid(SEXP x)
{
    if (TYPEOF(x) != REALSXP) error("'x' must be double");
    const double *v = REAL(x);
    R_xlen_t n = XLENGTH(x);
    for (R_xlen_t i = 0; i < n; i++)
        if (!valid_count(v[i])) return ScalarLogical(FALSE);
    return ScalarLogical(TRUE);
}

/* Copies one integer/logical/double vector to `out`; FALSE when a value is not a count (NA included). */
static int copy_counts(SEXP v, double *out)
{
    R_xlen_t n = XLENGTH(v);
    int ok = 1;
    if (TYPEOF(v) == REALSXP) {
        const double *p = REAL(v);
        for (R_xlen_t i = 0; i < n; i++) {
            out[i] = p[i];
            ok &= valid_count(p[i]);
        }
    } else {
        const int *p = TYPEOF(v) == INTSXP ? INTEGER(v) : LOGICAL(v); /* NA: INT_MIN, negative */
        for (R_xlen_t i = 0; i < n; i++) {
            out[i] = p[i];
            ok &= p[i] >= 0;
        }
    }
    return ok;
}

/* The double matrix of dimensions `dims` (rows, columns) whose columns are the vectors of the list `cols`
 * one after another (integer, logical or double; a vector may span several columns, e.g. a whole integer
 * matrix), or NULL when a value is negative, NA or infinite. */
static SEXP gm_count_matrix(SEXP cols, SEXP dims)
{
    if (TYPEOF(cols) != VECSXP) error("'cols' must be a list");
    if (TYPEOF(dims) != INTSXP || XLENGTH(dims) != 2) error("'dims' must be two integers");
    R_xlen_t total = 0;
    for (R_xlen_t k = 0; k < XLENGTH(cols); k++) {
        SEXP v = VECTOR_ELT(cols, k);
        if (TYPEOF(v) != REALSXP && TYPEOF(v) != INTSXP && TYPEOF(v) != LGLSXP)
            error("column %d is not integer, logical or double", (int) k + 1);
        total += XLENGTH(v);
    }
    if (total != (R_xlen_t) INTEGER(dims)[0] * INTEGER(dims)[1]) error("the columns do not fill the matrix");
    SEXP x = PROTECT(alloc_result(REALSXP, total));
    setAttrib(x, R_DimSymbol, dims);
    double *out = REAL(x);
    int ok = 1;
    for (R_xlen_t k = 0; k < XLENGTH(cols); k++) {
        SEXP v = VECTOR_ELT(cols, k);
        ok &= copy_counts(v, out);
        out += XLENGTH(v);
    }
    UNPROTECT(1);
    return ok ? x : R_NilValue;
}

/* Writes v in decimal (as R prints an integer; "NA" for NA) to buf; returns the length. */
static size_t put_int(char *buf, int v)
{
    if (v == NA_INTEGER) {
        memcpy(buf, "NA", 2);
        return 2;
    }
    char digits[12];
    size_t k = 0, len = 0;
    unsigned int u = v < 0 ? 0u - (unsigned int) v : (unsigned int) v;
    do {
        digits[k++] = (char) ('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) buf[len++] = '-';
    while (k) buf[len++] = digits[--k];
    return len;
}

/* room for "_start_end" after the chromosome name */
#define COORDS_MAX (2 * 12 + 2)

/* Writes cn.mops's row name "level_start_end" to buf; returns its length. */
static size_t put_region_name(char *buf, const char *level, size_t level_len, int start, int end)
{
    size_t len = level_len;
    memcpy(buf, level, len);
    buf[len++] = '_';
    len += put_int(buf + len, start);
    buf[len++] = '_';
    len += put_int(buf + len, end);
    return len;
}

/* Row names, made on demand: an ALTREP character vector over the regions (data1: list(levels, index,
 * start, end), as gm_region_names takes them) that makes a name when one is read and all of them when R
 * needs the vector in memory (data2 then holds it). cn.mops's result carries the row names on five slots,
 * but most uses never read them; made eagerly, 481,299 names cost 0.1-0.5 s and as many CHARSXPs. */
static R_altrep_class_t region_names_class;

static SEXP rn_part(SEXP x, int k)
{
    return VECTOR_ELT(R_altrep_data1(x), k);
}

static R_xlen_t rn_length(SEXP x)
{
    return XLENGTH(rn_part(x, 1));
}

static SEXP rn_elt(SEXP x, R_xlen_t i)
{
    SEXP full = R_altrep_data2(x);
    if (full != R_NilValue) return STRING_ELT(full, i);
    const void *vmax = vmaxget();
    const char *level = translateCharUTF8(STRING_ELT(rn_part(x, 0), INTEGER(rn_part(x, 1))[i] - 1));
    size_t level_len = strlen(level);
    char small[256];
    char *buf = level_len + COORDS_MAX <= sizeof(small) ? small : R_alloc(level_len + COORDS_MAX, 1);
    int start = INTEGER(rn_part(x, 2))[i], end = INTEGER(rn_part(x, 3))[i];
    size_t len = put_region_name(buf, level, level_len, start, end);
    SEXP name = mkCharLenCE(buf, (int) len, CE_UTF8);
    vmaxset(vmax);
    return name;
}

/* All names, as a regular character vector, kept as data2. */
static SEXP rn_expanded(SEXP x)
{
    SEXP full = R_altrep_data2(x);
    if (full != R_NilValue) return full;
    SEXP levels = rn_part(x, 0);
    R_xlen_t n = rn_length(x), nlev = XLENGTH(levels);
    const void *vmax = vmaxget();
    const char **lev = (const char **) R_alloc(nlev, sizeof(char *));
    size_t *lev_len = (size_t *) R_alloc(nlev, sizeof(size_t)), longest = 0;
    for (R_xlen_t l = 0; l < nlev; l++) {
        lev[l] = translateCharUTF8(STRING_ELT(levels, l)); /* "NA" for NA, as paste() */
        lev_len[l] = strlen(lev[l]);
        if (lev_len[l] > longest) longest = lev_len[l];
    }
    char *buf = R_alloc(longest + COORDS_MAX, 1);
    const int *ix = INTEGER(rn_part(x, 1)), *s = INTEGER(rn_part(x, 2)), *e = INTEGER(rn_part(x, 3));
    full = PROTECT(allocVector(STRSXP, n));
    for (R_xlen_t i = 0; i < n; i++) {
        size_t len = put_region_name(buf, lev[ix[i] - 1], lev_len[ix[i] - 1], s[i], e[i]);
        SET_STRING_ELT(full, i, mkCharLenCE(buf, (int) len, CE_UTF8));
    }
    R_set_altrep_data2(x, full);
    vmaxset(vmax);
    UNPROTECT(1);
    return full;
}

static void *rn_dataptr(SEXP x, Rboolean writeable)
{
    (void) writeable;
    return STRING_PTR(rn_expanded(x));
}

static const void *rn_dataptr_or_null(SEXP x)
{
    SEXP full = R_altrep_data2(x);
    return full == R_NilValue ? NULL : STRING_PTR_RO(full);
}

static void rn_set_elt(SEXP x, R_xlen_t i, SEXP v)
{
    SET_STRING_ELT(rn_expanded(x), i, v);
}

static int rn_no_na(SEXP x)
{
    (void) x;
    return 1;
}

static void init_region_names_class(DllInfo *dll)
{
    region_names_class = R_make_altstring_class("region_names", "gcn.mops", dll);
    R_set_altrep_Length_method(region_names_class, rn_length);
    R_set_altvec_Dataptr_method(region_names_class, rn_dataptr);
    R_set_altvec_Dataptr_or_null_method(region_names_class, rn_dataptr_or_null);
    R_set_altstring_Elt_method(region_names_class, rn_elt);
    R_set_altstring_Set_elt_method(region_names_class, rn_set_elt);
    R_set_altstring_No_NA_method(region_names_class, rn_no_na);
}

/* cn.mops's row names, paste(levels[index], start, end, sep = "_"), for integer coordinates: a character
 * vector whose names are made when read (see region_names_class). */
static SEXP gm_region_names(SEXP levels, SEXP index, SEXP start, SEXP end)
{
    if (!isString(levels) || TYPEOF(index) != INTSXP || TYPEOF(start) != INTSXP || TYPEOF(end) != INTSXP)
        error("'levels' must be character, 'index', 'start' and 'end' integer");
    R_xlen_t n = XLENGTH(index), nlev = XLENGTH(levels);
    if (XLENGTH(start) != n || XLENGTH(end) != n) error("'index', 'start' and 'end' differ in length");
    const int *ix = INTEGER(index);
    for (R_xlen_t i = 0; i < n; i++)
        if (ix[i] == NA_INTEGER || ix[i] < 1 || ix[i] > nlev)
            error("'index' out of range at %lld", (long long) i + 1);
    SEXP state = PROTECT(allocVector(VECSXP, 4));
    SEXP parts[] = {levels, index, start, end};
    for (int k = 0; k < 4; k++) {
        MARK_NOT_MUTABLE(parts[k]); /* shared with the caller: never modified in place */
        SET_VECTOR_ELT(state, k, parts[k]);
    }
    SEXP x = R_new_altrep(region_names_class, state, R_NilValue);
    UNPROTECT(1);
    return x;
}

/* The labels classes[idx + 1] of the raw matrix `idx` of 0-based class indices (NA beyond the classes),
 * with idx's dimensions. */
static SEXP gm_labels(SEXP idx, SEXP classes)
{
    if (TYPEOF(idx) != RAWSXP || !isString(classes)) error("'idx' must be raw and 'classes' character");
    R_xlen_t n = XLENGTH(idx), ncls = XLENGTH(classes);
    const Rbyte *p = RAW(idx);
    SEXP out = PROTECT(alloc_result(STRSXP, n));
    for (R_xlen_t i = 0; i < n; i++)
        SET_STRING_ELT(out, i, p[i] < ncls ? STRING_ELT(classes, p[i]) : NA_STRING);
    SEXP dims = getAttrib(idx, R_DimSymbol);
    if (!isNull(dims)) setAttrib(out, R_DimSymbol, dims);
    UNPROTECT(1);
    return out;
}

/* Position of the string s among classes (0-based; NA when absent or NA). */
static int class_index(SEXP s, SEXP classes)
{
    if (s == NA_STRING) return NA_INTEGER;
    R_xlen_t ncls = XLENGTH(classes);
    for (R_xlen_t k = 0; k < ncls; k++) /* R caches strings: equal ones are mostly the same CHARSXP */
        if (STRING_ELT(classes, k) == s) return (int) k;
    const char *u = translateCharUTF8(s);
    for (R_xlen_t k = 0; k < ncls; k++) {
        SEXP c = STRING_ELT(classes, k);
        if (c != NA_STRING && strcmp(translateCharUTF8(c), u) == 0) return (int) k;
    }
    return NA_INTEGER;
}

/* The inverse of gm_labels: match(labels, classes) - 1L, with the dimensions of `labels`. */
static SEXP gm_label_index(SEXP labels, SEXP classes)
{
    if (!isString(labels) || !isString(classes)) error("'labels' and 'classes' must be character");
    R_xlen_t n = XLENGTH(labels);
    SEXP out = PROTECT(alloc_result(INTSXP, n));
    int *o = INTEGER(out);
    SEXP last = NULL;
    int last_index = NA_INTEGER;
    for (R_xlen_t i = 0; i < n; i++) {
        SEXP s = STRING_ELT(labels, i);
        if (s != last) {
            last = s;
            last_index = class_index(s, classes);
        }
        o[i] = last_index;
    }
    SEXP dims = getAttrib(labels, R_DimSymbol);
    if (!isNull(dims)) setAttrib(out, R_DimSymbol, dims);
    UNPROTECT(1);
    return out;
}

static const R_CallMethodDef call_methods[] = {
    {"gm_alloc", (DL_FUNC) &gm_alloc, 2},
    {"gm_counts_valid", (DL_FUNC) &gm_counts_valid, 1},
    {"gm_count_matrix", (DL_FUNC) &gm_count_matrix, 2},
    {"gm_region_names", (DL_FUNC) &gm_region_names, 4},
    {"gm_labels", (DL_FUNC) &gm_labels, 2},
    {"gm_label_index", (DL_FUNC) &gm_label_index, 2},
    {NULL, NULL, 0}};

void R_init_gcn_mops(DllInfo *dll)
{
    init_region_names_class(dll);
    R_registerRoutines(dll, NULL, call_methods, NULL, NULL);
    R_useDynamicSymbols(dll, FALSE);
    R_forceSymbols(dll, TRUE);
}
