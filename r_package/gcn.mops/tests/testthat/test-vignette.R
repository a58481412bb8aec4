# cn.mops's vignette workflow with the one-word substitution (library(gcn.mops); cn.mops( -> gcn.mops(
# and family), on gcn.mops's own data(cn.mops) and extdata BAMs: every step runs, and the results equal
# the golden outputs of cn.mops where there are some.

test_that("cn.mops's vignette runs with gcn.mops and gives cn.mops's results", {
  skip_if_no_engine()
  skip_if_no_golden("xranges_default")
  e <- new.env()
  pdf_file <- tempfile(fileext = ".pdf")
  grDevices::pdf(pdf_file)
  on.exit(grDevices::dev.off(), add = TRUE)
  local(envir = e, {
    BAMFiles <- list.files(system.file("extdata", package = "gcn.mops"), pattern = ".bam$", full.names = TRUE)
    bamDataRanges <- getReadCountsFromBAM(BAMFiles, sampleNames = paste("Sample", 1:3), mode = "unpaired")
    utils::data(cn.mops, package = "gcn.mops", envir = environment())
    resCNMOPS <- suppressMessages(gcn.mops(XRanges))
    plot(resCNMOPS, which = 7, toFile = TRUE)
    resCNMOPS <- suppressMessages(calcIntegerCopyNumbers(resCNMOPS))
    c1 <- cnvs(resCNMOPS)[1:5]
    c2 <- cnvr(resCNMOPS)[1, 1:5]
    overlap <- IRanges::ranges(cnvr(resCNMOPS)) %over% IRanges::ranges(CNVRanges)
    segplot(resCNMOPS, sampleIdx = 13, seqnames = "chrA")
    plot(resCNMOPS, which = 1, toFile = TRUE)
    resultExomeData <- suppressMessages(exomegcn.mops(exomeCounts))
    resultExomeData <- suppressMessages(calcIntegerCopyNumbers(resultExomeData))
    plot(resultExomeData, which = 5, toFile = TRUE)
    XchrX <- normalizeChromosomes(X[1:500, ], ploidy = c(rep(1, 10), rep(2, 30)))
    cnvrX <- cnvr(suppressMessages(calcIntegerCopyNumbers(suppressMessages(gcn.mops(XchrX, norm = FALSE)))))
  })
  expect_identical(length(e$bamDataRanges), 2522L)
  expect_identical(colnames(S4Vectors::mcols(e$bamDataRanges)), paste("Sample", 1:3))
  # every slot, and the integer tables (the raw tables, CN still NA, are those of test-golden.R's cases)
  expect_golden(e$resCNMOPS, "xranges_default", integer = e$resCNMOPS, tables = FALSE)
  expect_true(any(e$overlap))
  skip_if_no_golden("exome_exomecn")
  expect_golden(e$resultExomeData, "exome_exomecn", integer = e$resultExomeData, tables = FALSE)
  expect_s4_class(e$cnvrX, "GRanges")
  if (requireNamespace("DNAcopy", quietly = TRUE)) {
    set.seed(0)
    resRef <- suppressMessages(referencegcn.mops(cases = e$X[, 1], controls = rowMeans(e$X),
      classes = c("CN0", "CN1", "CN2", "CN3", "CN4", "CN5", "CN6", "CN7", "CN8", "CN16", "CN32", "CN64", "CN128"),
      I = c(0.025, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 8, 16, 32, 64), segAlgorithm = "DNAcopy"))
    resRef <- suppressMessages(calcIntegerCopyNumbers(resRef))
    expect_s4_class(cnvs(resRef), "GRanges")
  }
})
