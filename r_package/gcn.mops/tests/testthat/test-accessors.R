# Accessors: cn.mops's generics, types and dimnames; show(); calcIntegerCopyNumbers().

test_that("accessors return cn.mops's types with cn.mops's names", {
  skip_if_no_engine()
  d <- cn_data()
  x <- d$XRanges[1:800, 1:12]
  r <- suppressMessages(gcn.mops(x, backend = "cpu"))
  m <- length(x)
  sn <- colnames(S4Vectors::mcols(x))
  expect_s4_class(gr(r), "GRanges")
  expect_identical(length(gr(r)), m)
  for (f in list(normalizedData, localAssessments, individualCall, integerCopyNumber)) {
    g <- f(r)
    expect_s4_class(g, "GRanges")
    expect_identical(colnames(S4Vectors::mcols(g)), sn)
    expect_identical(BiocGenerics::start(g), BiocGenerics::start(x))
  }
  ini <- iniCall(r)
  expect_s4_class(ini, "GRanges")
  expect_type(S4Vectors::mcols(ini)[[1]], "double")
  expect_type(S4Vectors::mcols(integerCopyNumber(r))[[1]], "character")
  expect_true(all(unlist(as.list(S4Vectors::mcols(integerCopyNumber(r)))) %in% paste0("CN", 0:8)))
  expect_identical(rownames(r@localAssessments)[1:2], paste("chrA", start(x)[1:2], end(x)[1:2], sep = "_"))
  expect_identical(names(r@iniCall)[1], rownames(r@localAssessments)[1])
  expect_null(rownames(r@individualCall))
  expect_identical(sampleNames(r), sn)
  p <- params(r)
  expect_type(p, "list")
  expect_identical(p$method, "cn.mops")
  expect_identical(dim(p$L), c(m, 9L))
  expect_identical(colnames(p$A), paste0("CN", 0:8))
  expect_identical(posteriorProbs(r), array(NA, dim = c(1, 1, 1)))
  for (f in list(segmentation, cnvs, cnvr)) expect_s4_class(f(r), "GRanges")
  expect_identical(colnames(S4Vectors::mcols(cnvs(r))), c("sampleName", "median", "mean", "CN"))
  expect_type(S4Vectors::mcols(cnvs(r))$sampleName, "character")
  expect_true(all(is.na(S4Vectors::mcols(cnvr(r))[[1]])))
  expect_output(show(r), "CNVDetectionResult")

  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_s4_class(ri, "CNVDetectionResult")
  expect_identical(colnames(S4Vectors::mcols(cnvr(ri))), sn)
  expect_type(S4Vectors::mcols(cnvr(ri))[[1]], "character")
  expect_true(all(S4Vectors::mcols(cnvs(ri))$CN %in% paste0("CN", 0:8)))
  expect_true(all(S4Vectors::mcols(segmentation(ri))$CN %in% paste0("CN", 0:8)))
  expect_identical(ri@localAssessments, r@localAssessments)
  expect_error(gr(1), "unable to find an inherited method")
})

test_that("no segmentation below 6 regions, as cn.mops", {
  skip_if_no_engine()
  d <- cn_data()
  r <- suppressWarnings(suppressMessages(gcn.mops(d$X[1:5, 1:10])))
  expect_length(segmentation(r), 0L)
  expect_length(cnvs(r), 0L)
  expect_identical(r@individualCall, r@localAssessments)
  expect_error(calcIntegerCopyNumbers(r), "No CNV regions in result object")
})

test_that("integer counts, logical norm, unordered chromosomes", {
  skip_if_no_engine()
  d <- cn_data()
  x <- d$X[1:300, 1:8]
  storage.mode(x) <- "integer"
  r1 <- suppressMessages(gcn.mops(x, norm = TRUE))
  y <- x
  storage.mode(y) <- "double"
  r2 <- suppressMessages(gcn.mops(y))
  expect_identical(r1@localAssessments, r2@localAssessments)
  expect_identical(colnames(r1@localAssessments), colnames(x))
  colnames(y) <- NULL
  r3 <- suppressMessages(gcn.mops(y))
  expect_identical(sampleNames(r3), paste0("Sample_", 1:8))
  g <- GenomicRanges::GRanges(rep(c("1", "2", "1"), each = 100), IRanges::IRanges(c(1:100, 1:100, 101:200) * 10,
                                                                                   width = 10))
  S4Vectors::mcols(g) <- y
  expect_warning(r4 <- suppressMessages(gcn.mops(g)), "not contiguous")
  expect_identical(as.character(GenomeInfoDb::seqnames(gr(r4)))[c(1, 200, 201)], c("1", "1", "2"))
})
