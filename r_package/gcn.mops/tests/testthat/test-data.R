# gcn.mops() on cn.mops's own data set (XRanges, X, exomeCounts), against the golden outputs of
# cn.mops 1.53 on the same calls, slot by slot.

test_that("the issue's line works: gcn.mops(XRanges) -> calcIntegerCopyNumbers -> cnvr", {
  skip_if_no_engine()
  skip_if_no_golden("xranges_default")
  d <- cn_data()
  r <- suppressMessages(gcn.mops(d$XRanges))
  expect_s4_class(r, "CNVDetectionResult")
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  cr <- cnvr(ri)
  expect_s4_class(cr, "GRanges")
  expect_identical(colnames(S4Vectors::mcols(cr)), colnames(S4Vectors::mcols(d$XRanges)))
  expect_golden(r, "xranges_default", integer = ri)
})

test_that("exomeCounts (GRanges, chr 22) as cn.mops(exomeCounts)", {
  skip_if_no_engine()
  skip_if_no_golden("exome_default")
  d <- cn_data()
  r <- suppressMessages(gcn.mops(d$exomeCounts))
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_golden(r, "exome_default", integer = ri)
})

test_that("matrix input, norm = 0, posteriors: cn.mops(X[1:1500, ], norm=0, returnPosterior=TRUE)", {
  skip_if_no_engine()
  skip_if_no_golden("xranges_norm0_posterior")
  d <- cn_data()
  r <- suppressMessages(gcn.mops(d$X[1:1500, ], norm = 0, returnPosterior = TRUE))
  expect_golden(r, "xranges_norm0_posterior")
  expect_identical(dim(posteriorProbs(r)), c(1500L, 9L, 40L))
  expect_identical(as.character(GenomeInfoDb::seqnames(gr(r)))[1], "undef")
})

test_that("exomegcn.mops() has exomecn.mops()'s defaults", {
  skip_if_no_engine()
  skip_if_no_golden("exome_exomecn")
  d <- cn_data()
  r <- suppressMessages(exomegcn.mops(d$exomeCounts))
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_golden(r, "exome_exomecn", integer = ri)
})
