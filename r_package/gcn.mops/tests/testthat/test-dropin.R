# gcn.mops as a drop-in for cn.mops (issue 17): R's random stream, search path, the thesis interface,
# the result class, and the functions beyond the models (segment, read counting, makeRobustCNVR,
# calcFractionalCopyNumbers, plots, data sets).

small_counts <- function(m = 300L) {
  e <- new.env()
  utils::data("cn.mops", package = "gcn.mops", envir = e)
  e$X[seq_len(m), ]
}

test_that("the example data sets are cn.mops's (built from the golden inputs)", {
  e <- new.env()
  utils::data("cn.mops", package = "gcn.mops", envir = e)
  expect_setequal(ls(e), c("XRanges", "X", "CNVRanges", "exomeCounts"))
  expect_identical(dim(e$X), c(5000L, 40L))
  expect_identical(storage.mode(e$X), "integer")
  expect_s4_class(e$XRanges, "GRanges")
  expect_identical(length(e$exomeCounts), 3785L)
  expect_identical(ncol(S4Vectors::mcols(e$exomeCounts)), 22L)
  skip_if_no_golden("xranges_default")
  expect_identical(unname(as.matrix(S4Vectors::mcols(e$XRanges))), unname(golden_array("xranges_default", "input_counts")))
  if (!is.na(RDATA) && file.exists(RDATA)) {
    ref <- new.env()
    load(RDATA, envir = ref)
    expect_identical(e$X, ref$X)
    for (n in c("XRanges", "exomeCounts", "CNVRanges"))
      expect_identical(as.data.frame(e[[n]]), as.data.frame(ref[[n]]), info = n)
  }
})

test_that("R's random stream is untouched and the search path unchanged", {
  skip_if_no_engine()
  x <- small_counts()
  before <- search()
  set.seed(1)
  r <- suppressMessages(gcn.mops(x))
  after_run <- runif(3)
  set.seed(1)
  expect_identical(after_run, runif(3))
  expect_identical(search(), before)
  # no .Random.seed created by a call when there was none
  had <- exists(".Random.seed", envir = globalenv())
  if (had) {
    saved <- get(".Random.seed", envir = globalenv())
    rm(".Random.seed", envir = globalenv())
    on.exit(assign(".Random.seed", saved, envir = globalenv()))
  }
  r <- suppressMessages(gcn.mops(x))
  expect_false(exists(".Random.seed", envir = globalenv()))
})

test_that("the DNAcopy path is seeded from R's stream: set.seed() reproduces a run", {
  skip_if_no_engine()
  skip_if_not_installed("DNAcopy")
  x <- small_counts(500L)
  run <- function(seed) {
    set.seed(seed)
    r <- suppressMessages(referencegcn.mops(x[, 1], rowMeans(x), segAlgorithm = "DNAcopy"))
    list(r = r, next_draw = runif(1))
  }
  a <- run(7)
  b <- run(7)
  expect_identical(a$r@segmentation, b$r@segmentation)
  expect_identical(a$r@cnvs, b$r@cnvs)
  set.seed(7)
  expect_identical(a$next_draw, runif(1))
  expect_identical(a$r@params$SegmentationParams, character(0))
})

test_that("the thesis interface: gpu = <device id>, gcn.mops::cn.mops() as the CPU path", {
  skip_if_no_engine()
  x <- small_counts()
  expect_error(gcn.mops(x, gpu = "a"), "\"gpu\" must be the id of a GPU device", fixed = TRUE)
  r <- suppressMessages(gcn.mops(x, gpu = 0))
  ref <- suppressMessages(gcn.mops::cn.mops(x))
  expect_identical(r@cnvr, ref@cnvr)
  expect_identical(r@localAssessments, ref@localAssessments)
  if (!isTRUE(gcn.mops:::.gpu_usable()))
    expect_message(gcn.mops(x, gpu = 0), "No usable CUDA GPU found: running on the CPU.", fixed = TRUE)
  for (f in c("cn.mops", "exomecn.mops", "haplocn.mops", "referencecn.mops", "singlecn.mops")) {
    fun <- getExportedValue("gcn.mops", f)
    expect_identical(formals(fun)$backend, "cpu", info = f)
    expect_true("gpu" %in% names(formals(fun)), info = f)
  }
})

test_that("results carry their class by name only and survive saveRDS/readRDS", {
  skip_if_no_engine()
  r <- suppressMessages(gcn.mops(small_counts()))
  expect_identical(class(r), "CNVDetectionResult")   # no "package" attribute (see ?CNVDetectionResult)
  f <- tempfile(fileext = ".rds")
  saveRDS(r, f)
  back <- readRDS(f)
  expect_true(validObject(back))
  expect_identical(back@cnvr, r@cnvr)
  expect_s4_class(makeRobustCNVR(back), "CNVDetectionResult")
})

test_that("engine errors are R errors without a Python traceback", {
  skip_if_no_engine()
  x <- small_counts()
  e <- tryCatch(suppressMessages(gcn.mops(x, minSeg = 5)), error = identity)
  expect_s3_class(e, "error")
  expect_false(grepl("Traceback|File \"", conditionMessage(e)))
  e <- tryCatch(segment(c(1, 2, 3), alpha = "a"), error = identity)
  expect_s3_class(e, "error")
})

test_that("segment() gives cn.mops's segments (golden 'segment')", {
  skip_if_no_engine()
  skip_if_no_golden("segment")
  man <- manifest("segment")
  calls <- list(default = list(), minSeg5_eps0 = list(minSeg = 5, eps = 0), alpha20 = list(alpha = 20))
  for (v in names(man$arrays)) for (case in names(calls)) {
    name <- paste(v, case, sep = "_")
    if (!(name %in% names(man$tables))) next
    gold <- utils::read.delim(file.path(GOLDEN, "segment", man$tables[[name]]$file))
    mine <- do.call(segment, c(list(golden_array("segment", v)), calls[[case]]))
    expect_identical(names(mine), c("start", "end", "mean", "median"), info = name)
    expect_identical(as.integer(mine$start), as.integer(gold$start), info = name)
    expect_identical(as.integer(mine$end), as.integer(gold$end), info = name)
    expect_close(mine$mean, gold$mean, atol = 1e-12, what = paste(name, "mean"))
    expect_close(mine$median, gold$median, atol = 1e-12, what = paste(name, "median"))
  }
})

test_that("getReadCountsFromBAM / getSegmentReadCountsFromBAM count as cn.mops (golden 'bam_counts')", {
  skip_if_no_engine()
  skip_if_no_golden("bam_counts")
  bams <- list.files(system.file("extdata", package = "gcn.mops"), pattern = "\\.bam$", full.names = TRUE)
  expect_length(bams, 3L)
  for (wl in c(5000, 10000)) {
    gold <- golden_table("bam_counts", paste0("counts_WL", wl))
    g <- getReadCountsFromBAM(bams, WL = wl, mode = "unpaired")
    expect_s4_class(g, "GRanges")
    expect_identical(colnames(S4Vectors::mcols(g)), c("test1", "test2", "test3"))
    expect_type(S4Vectors::mcols(g)[[1]], "integer")
    ours <- granges_table(g)
    expect_identical(nrow(ours), nrow(gold))
    for (col in names(gold)) expect_identical(as.vector(ours[[col]]), as.vector(gold[[col]]), info = paste(wl, col))
    expect_false(anyNA(GenomeInfoDb::seqlengths(g)))
  }
  named <- getReadCountsFromBAM(bams, sampleNames = paste("Sample", 1:3), WL = 10000)
  expect_identical(colnames(S4Vectors::mcols(named)), paste("Sample", 1:3))
  gold <- golden_table("bam_counts", "segment_counts")
  gr <- GenomicRanges::GRanges(gold$seqnames, IRanges::IRanges(gold$start, gold$end))
  s <- getSegmentReadCountsFromBAM(bams, GR = gr, mode = "unpaired")
  ours <- granges_table(s)
  for (col in names(gold)) expect_identical(as.vector(ours[[col]]), as.vector(gold[[col]]), info = col)
  expect_error(getReadCountsFromBAM(file.path(tempdir(), "none.bam")), "not found")
})

test_that("makeRobustCNVR: robust regions from the INI call, or the union of the CNVs", {
  skip_if_no_engine()
  e <- new.env()
  utils::data("cn.mops", package = "gcn.mops", envir = e)
  r <- suppressMessages(gcn.mops(e$XRanges[1:2000]))
  rr <- makeRobustCNVR(r, robust = 0.5, minWidth = 4)
  expect_s4_class(cnvr(rr), "GRanges")
  expect_identical(colnames(S4Vectors::mcols(cnvr(rr))), r@sampleNames)
  expect_true(all(is.na(as.matrix(S4Vectors::mcols(cnvr(rr))))))
  expect_identical(rr@cnvs, r@cnvs)
  # each robust region covers regions whose INI call is high on average
  for (k in seq_along(cnvr(rr))) {
    rows <- IRanges::overlapsAny(r@gr, cnvr(rr)[k])
    expect_gt(mean(r@iniCall[rows]), 0.5)
  }
  ru <- makeRobustCNVR(r, robust = 0)
  expect_identical(IRanges::ranges(cnvr(ru)), IRanges::ranges(GenomicRanges::reduce(r@cnvs)))
  if (length(cnvr(rr))) {
    ri <- suppressMessages(calcIntegerCopyNumbers(rr))
    expect_true(all(as.matrix(S4Vectors::mcols(cnvr(ri))) %in% paste0("CN", 0:8)))
  }
})

test_that("calcFractionalCopyNumbers: referencecn.mops results only, labels CN<x.y>", {
  skip_if_no_engine()
  x <- small_counts(2000L)
  r <- suppressMessages(gcn.mops(x))
  expect_error(suppressMessages(calcFractionalCopyNumbers(r)), "Only possible for referencecn.mops!", fixed = TRUE)
  ref <- suppressMessages(referencegcn.mops(x[, 1:5], x[, 6:40], segAlgorithm = "fast"))
  skip_if(length(ref@cnvr) == 0L, "no CNV regions in the reference run")
  f <- suppressMessages(calcFractionalCopyNumbers(ref))
  lab <- as.matrix(S4Vectors::mcols(cnvr(f)))
  expect_identical(dim(lab), c(length(ref@cnvr), 5L))
  expect_true(all(grepl("^CN[0-9]+\\.[0-9]$", lab)))
  expect_true(all(grepl("^CN[0-9]+\\.[0-9]$", S4Vectors::mcols(cnvs(f))$CN)))
  expect_true(all(grepl("^CN[0-9]+\\.[0-9]$", S4Vectors::mcols(segmentation(f))$CN)))
})

test_that("plot() and segplot() draw in base graphics", {
  skip_if_no_engine()
  e <- new.env()
  utils::data("cn.mops", package = "gcn.mops", envir = e)
  r <- suppressMessages(gcn.mops(e$XRanges[1:2000]))
  f <- tempfile(fileext = ".pdf")
  grDevices::pdf(f)
  on.exit(grDevices::dev.off())
  expect_silent(plot(r, which = 1, toFile = TRUE))
  expect_silent(segplot(r, sampleIdx = 13, seqnames = "chrA"))
  expect_silent(segplot(r, sampleIdx = c(1, 2)))
  expect_error(plot(r, which = length(r@cnvr) + 1L), "which")
  expect_error(segplot(r, sampleIdx = 99), "sampleIdx")
})

test_that("the engine search probes Pythons before starting one", {
  expect_match(gcn.mops:::.probe_python(file.path(tempdir(), "no-python")), "does not exist")
  old <- options(gcn.mops.python = file.path(tempdir(), "no-python"))
  on.exit(options(old))
  expect_error(gcn.mops:::.find_python(), "options(gcn.mops.python)", fixed = TRUE)
})
