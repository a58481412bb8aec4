# gcn.mops() on cn.mops's own data set (XRanges, X, exomeCounts), against the golden outputs of
# cn.mops 1.53 on the same calls, slot by slot. gcn.mops(XRanges) and exomegcn.mops(exomeCounts) with their
# defaults, and calcIntegerCopyNumbers() of both, are compared in test-vignette.R.

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
