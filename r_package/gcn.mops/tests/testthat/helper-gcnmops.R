# Shared data and golden outputs of the real cn.mops: GCNMOPS_SHARED_DIR / GCNMOPS_GOLDEN_DIR, else
# ../shared next to the gcnmops repository (found from this test directory or the installed package).

.find_shared <- function() {
  env <- Sys.getenv("GCNMOPS_SHARED_DIR", "")
  if (nzchar(env)) return(normalizePath(env, mustWork = FALSE))
  candidates <- c(file.path(getwd(), "..", "..", "..", "..", "..", "shared"))
  root <- gcn.mops:::.repo_root()
  if (!is.null(root)) candidates <- c(file.path(root, "..", "shared"), candidates)
  for (p in candidates) if (dir.exists(p)) return(normalizePath(p))
  NA_character_
}

SHARED <- .find_shared()
GOLDEN <- {
  g <- Sys.getenv("GCNMOPS_GOLDEN_DIR", "")
  if (nzchar(g)) g else if (!is.na(SHARED)) file.path(SHARED, "golden") else NA_character_
}
RDATA <- if (is.na(SHARED)) NA_character_ else file.path(SHARED, "data", "cn.mops.RData")

.engine_ok <- local({
  ok <- NULL
  function() {
    if (is.null(ok)) ok <<- tryCatch({ gcn.mops:::.engine(); TRUE }, error = function(e) conditionMessage(e))
    ok
  }
})

skip_if_no_engine <- function() {
  ok <- .engine_ok()
  if (!isTRUE(ok)) skip(paste("Python engine not available:", ok))
}

skip_if_no_golden <- function(case = NULL) {
  if (is.na(GOLDEN) || !dir.exists(GOLDEN)) skip("golden directory not found (set GCNMOPS_GOLDEN_DIR)")
  if (!is.null(case) && !file.exists(file.path(GOLDEN, case, "manifest.json")))
    skip(paste("golden case", case, "not found"))
}

cn_data <- local({
  e <- NULL
  function() {
    if (is.na(RDATA) || !file.exists(RDATA)) skip("cn.mops.RData not found (set GCNMOPS_SHARED_DIR)")
    if (is.null(e)) { e <<- new.env(); load(RDATA, envir = e) }
    e
  }
})

manifest <- function(case)
  jsonlite::fromJSON(file.path(GOLDEN, case, "manifest.json"), simplifyVector = FALSE)

golden_array <- function(case, name) {
  info <- manifest(case)$arrays[[name]]
  path <- file.path(GOLDEN, case, info$file)
  shape <- as.integer(unlist(info$shape))
  if (info$dtype == "str") {
    tab <- utils::read.delim(gzfile(path), header = FALSE, colClasses = "character", na.strings = character(0),
                             quote = "", comment.char = "")
    v <- as.matrix(tab)
    dimnames(v) <- NULL
    if (length(shape) == 1L) v <- as.vector(v)
  } else {
    con <- gzfile(path, "rb")
    on.exit(close(con))
    n <- prod(shape)
    v <- if (info$dtype == "float64") readBin(con, "double", n = n, size = 8, endian = "little")
         else readBin(con, "integer", n = n, size = 4, endian = "little")
    if (length(shape) > 1L) dim(v) <- shape
  }
  dn <- info$dimnames
  if (!is.null(dn)) {
    dn <- lapply(dn, function(d) if (is.null(d)) NULL else unlist(d))
    if (length(shape) == 1L) names(v) <- dn[[1L]] else dimnames(v) <- dn
  }
  v
}

golden_table <- function(case, name) {
  info <- manifest(case)$tables[[name]]
  utils::read.delim(file.path(GOLDEN, case, info$file), colClasses = c(seqnames = "character"),
                    check.names = FALSE, na.strings = character(0), stringsAsFactors = FALSE)
}

# The input of a golden case as cn.mops got it: a GRanges (input_ranges) or a matrix.
golden_input <- function(case, cols = NULL) {
  counts <- golden_array(case, "input_counts")
  colnames(counts) <- unlist(manifest(case)$sampleNames)
  if ("input_ranges" %in% names(manifest(case)$tables)) {
    rg <- golden_table(case, "input_ranges")
    gr <- GenomicRanges::GRanges(rg$seqnames, IRanges::IRanges(rg$start, rg$end))
    S4Vectors::mcols(gr) <- S4Vectors::DataFrame(counts, check.names = FALSE)
    return(gr)
  }
  counts
}

# |a - e| <= rtol * |e| + atol, NA positions equal
expect_close <- function(actual, expected, rtol = 1e-9, atol = 1e-300, what = "") {
  a <- as.vector(actual)
  e <- as.vector(expected)
  expect_equal(length(a), length(e), info = what)
  expect_identical(is.na(a), is.na(e), info = what)
  ok <- is.na(e) | abs(a - e) <= rtol * abs(e) + atol
  if (!all(ok)) {
    i <- which(!ok)[1L]
    fail(sprintf("%s: %d value(s) beyond rtol %g; first at %d: %.17g vs cn.mops %.17g", what, sum(!ok), rtol,
                 i, a[i], e[i]))
  } else succeed()
}

# A GRanges as the golden tables write it: seqnames, start, end + metadata columns as text / numbers.
granges_table <- function(g) {
  df <- data.frame(seqnames = as.character(GenomeInfoDb::seqnames(g)), start = BiocGenerics::start(g),
                   end = BiocGenerics::end(g), stringsAsFactors = FALSE)
  mc <- S4Vectors::mcols(g)
  for (nm in names(mc)) df[[nm]] <- mc[[nm]]
  df
}

expect_table <- function(g, gold, what) {
  ours <- granges_table(g)
  expect_identical(names(ours), names(gold), info = what)
  expect_identical(nrow(ours), nrow(gold), info = what)
  for (col in names(gold)) {
    if (col %in% c("median", "mean")) {
      expect_close(ours[[col]], gold[[col]], atol = 1e-12, what = paste(what, col))
    } else {
      mine <- as.character(ours[[col]])
      mine[is.na(mine)] <- "NA"
      expect_identical(mine, as.character(gold[[col]]), info = paste(what, col))
    }
  }
}

# Every slot of a result against a golden case; `integer`: the same after calcIntegerCopyNumbers().
# tables = FALSE: r's segmentation, cnvs and cnvr are not compared (r is itself the integer result).
expect_golden <- function(r, case, integer = NULL, tables = TRUE) {
  man <- manifest(case)
  floor <- list(localAssessments = 1e-12, iniCall = 1e-12, posteriorProbs = 1e-15, individualCall = 1e-12,
                params_A = 1e-15)
  slots <- list(normalizedData = r@normalizedData, localAssessments = r@localAssessments,
                individualCall = r@individualCall, iniCall = r@iniCall, params_L = r@params$L,
                params_A = r@params$A, params_cov = r@params$cov, posteriorProbs = r@posteriorProbs)
  for (name in intersect(names(slots), names(man$arrays))) {
    gold <- golden_array(case, name)
    mine <- slots[[name]]
    what <- paste(case, name)
    expect_identical(dim(mine), dim(gold), info = what)
    if (is.null(dim(gold))) expect_identical(names(mine), names(gold), info = what)
    else expect_identical(dimnames(mine), dimnames(gold), info = what)
    expect_close(mine, gold, atol = if (is.null(floor[[name]])) 1e-300 else floor[[name]], what = what)
  }
  if (!("posteriorProbs" %in% names(man$arrays)))
    expect_identical(r@posteriorProbs, array(NA, dim = c(1, 1, 1)), info = paste(case, "posteriorProbs"))
  gold <- golden_array(case, "integerCopyNumber")
  expect_identical(r@integerCopyNumber, gold, info = paste(case, "integerCopyNumber"))
  expect_identical(r@sampleNames, unlist(man$sampleNames), info = paste(case, "sampleNames"))
  rp <- man$result_params
  for (nm in names(rp)) {
    mine <- r@params[[nm]]
    gold <- rp[[nm]]
    if (nm == "SegmentationParams") expect_identical(length(mine), length(unlist(gold)))
    else expect_equal(unname(as.vector(mine)), unlist(gold), info = paste(case, "params", nm))
  }
  expect_identical(names(r@params)[seq_along(rp)], names(rp), info = paste(case, "params names"))
  expect_identical(names(r@params)[-seq_along(rp)], c("cov", "L", "A"))
  expect_table(r@gr, golden_table(case, "gr"), paste(case, "gr"))
  if (tables)
    for (t in c("segmentation", "cnvs", "cnvr")) expect_table(methods::slot(r, t), golden_table(case, t), paste(case, t))
  if (!is.null(integer)) {
    for (t in c("segmentation", "cnvs", "cnvr"))
      expect_table(methods::slot(integer, t), golden_table(case, paste0(t, "_integer")),
                   paste(case, t, "integer"))
  }
}
