# SummarizedExperiment in and out, and DelayedArray / HDF5Array counts streamed through the engine: the same
# result, slot for slot, as the same counts in a GRanges (or a matrix).

# XRanges's first 2000 windows, split over two chromosomes (the streamed run goes chromosome by chromosome)
two_chromosomes <- function() {
  g <- cn_data()$XRanges[1:2000]
  chr <- rep(c("chrA", "chrB"), each = 1000L)
  out <- GenomicRanges::GRanges(chr, IRanges::IRanges(BiocGenerics::start(g), BiocGenerics::end(g)))
  S4Vectors::mcols(out) <- S4Vectors::mcols(g)
  out
}

expect_same_result <- function(r, ref) {
  for (s in methods::slotNames(ref)) expect_identical(methods::slot(r, s), methods::slot(ref, s), info = s)
}

test_that("a RangedSummarizedExperiment's assay, chosen by name or number, gives the GRanges's result", {
  skip_if_no_engine()
  skip_if_not_installed("SummarizedExperiment")
  g <- two_chromosomes()
  counts <- as.matrix(S4Vectors::mcols(g))
  ref <- suppressMessages(gcn.mops(g, backend = "cpu"))
  rse <- SummarizedExperiment::SummarizedExperiment(
    assays = list(gc = counts * 0 + 0.5, counts = counts), rowRanges = GenomicRanges::granges(g))
  expect_same_result(suppressMessages(gcn.mops(rse, backend = "cpu")), ref)        # "counts" by default
  expect_same_result(suppressMessages(gcn.mops(rse, assay = 2, backend = "cpu")), ref)
  expect_error(gcn.mops(rse, assay = "reads"), "no assay \"reads\" \\(its assays: \"gc\", \"counts\"\\)")
  # rows of a chromosome apart: regrouped, with the GRanges's warning and result
  o <- c(1:500, 1001:2000, 501:1000)
  expect_warning(r <- suppressMessages(gcn.mops(rse[o, ], backend = "cpu")), "regrouping rows")
  expect_warning(r0 <- suppressMessages(gcn.mops(g[o], backend = "cpu")), "regrouping rows")
  expect_same_result(r, r0)
  # no ranges: a matrix input
  se <- SummarizedExperiment::SummarizedExperiment(assays = list(counts = counts))
  expect_same_result(suppressMessages(gcn.mops(se, backend = "cpu")),
                     suppressMessages(gcn.mops(counts, backend = "cpu")))
})

test_that("the result as a RangedSummarizedExperiment", {
  skip_if_no_engine()
  skip_if_not_installed("SummarizedExperiment")
  r <- suppressMessages(gcn.mops(two_chromosomes(), backend = "cpu", returnPosterior = TRUE))
  rse <- methods::as(r, "RangedSummarizedExperiment")
  expect_s4_class(rse, "RangedSummarizedExperiment")
  expect_identical(dim(rse), dim(r@localAssessments))
  expect_identical(colnames(rse), r@sampleNames)
  expect_identical(SummarizedExperiment::assay(rse, "localAssessments"), r@localAssessments)
  expect_identical(unname(SummarizedExperiment::assay(rse, "integerCopyNumber")), unname(r@integerCopyNumber))
  expect_identical(SummarizedExperiment::rowData(rse)$iniCall, unname(r@iniCall))
  expect_identical(as.character(GenomeInfoDb::seqnames(SummarizedExperiment::rowRanges(rse))),
                   as.character(GenomeInfoDb::seqnames(r@gr)))
  md <- S4Vectors::metadata(rse)
  expect_identical(md$cnvr, r@cnvr)
  expect_identical(md$params, r@params)
  expect_identical(md$posteriorProbs, r@posteriorProbs)
})

test_that("HDF5Array counts are streamed through the engine and give the GRanges's result", {
  skip_if_no_engine()
  skip_if_not_installed("HDF5Array")
  g <- two_chromosomes()
  counts <- as.matrix(S4Vectors::mcols(g))
  h5 <- HDF5Array::writeHDF5Array(counts, tempfile(fileext = ".h5"), name = "counts", with.dimnames = TRUE)
  # blocks of 250 rows: several per chromosome
  old <- DelayedArray::getAutoBlockSize()
  suppressMessages(DelayedArray::setAutoBlockSize(250 * ncol(counts) * 4))   # integer counts: 4 bytes each
  on.exit(suppressMessages(DelayedArray::setAutoBlockSize(old)), add = TRUE)
  expect_gt(length(DelayedArray::rowAutoGrid(h5)), 4L)
  # the counts are read a block at a time: never as a whole matrix
  seen <- new.env()
  seen$rows <- integer()
  suppressMessages(trace("read_block", exit = bquote(assign("rows", c(.(seen)$rows, nrow(returnValue())), envir = .(seen))),
                         print = FALSE, where = asNamespace("DelayedArray")))
  on.exit(suppressMessages(untrace("read_block", where = asNamespace("DelayedArray"))), add = TRUE)
  rse <- SummarizedExperiment::SummarizedExperiment(assays = list(counts = h5),
                                                    rowRanges = GenomicRanges::granges(g))
  r <- suppressMessages(gcn.mops(rse, backend = "cpu", returnPosterior = TRUE))
  expect_gt(length(seen$rows), 4L)
  expect_identical(sum(seen$rows), nrow(counts))
  expect_lte(max(seen$rows), 250L)
  expect_same_result(r, suppressMessages(gcn.mops(g, backend = "cpu", returnPosterior = TRUE)))
  # a bare DelayedMatrix is a matrix input; norm = 0 and norm = 2 as in memory
  expect_same_result(suppressMessages(gcn.mops(h5, norm = 0, backend = "cpu")),
                     suppressMessages(gcn.mops(counts, norm = 0, backend = "cpu")))
  expect_same_result(suppressMessages(gcn.mops(rse, norm = 2, backend = "cpu")),
                     suppressMessages(gcn.mops(g, norm = 2, backend = "cpu")))
  expect_error(gcn.mops(h5, segAlgorithm = "DNAcopy"), "segAlgorithm = \"fast\" only")
})
