# haplogcn.mops, referencegcn.mops, singlegcn.mops against cn.mops's haplocn.mops, referencecn.mops,
# singlecn.mops on XRanges (golden cases), slot by slot.

test_that("haplogcn.mops(XRanges) as haplocn.mops(XRanges)", {
  skip_if_no_engine()
  skip_if_no_golden("haplo_xranges")
  d <- cn_data()
  r <- suppressMessages(haplogcn.mops(d$XRanges, backend = "cpu"))
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_golden(r, "haplo_xranges", integer = ri)
})

test_that("referencegcn.mops(cases, controls) as referencecn.mops", {
  skip_if_no_engine()
  skip_if_no_golden("reference_xranges")
  d <- cn_data()
  r <- suppressMessages(referencegcn.mops(cases = d$XRanges[, 1:5], controls = d$XRanges[, 6:40],
                                          segAlgorithm = "fast", backend = "cpu"))
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_golden(r, "reference_xranges", integer = ri)
})

test_that("singlegcn.mops(XRanges[, 1]) as singlecn.mops", {
  skip_if_no_engine()
  skip_if_no_golden("single_xranges")
  d <- cn_data()
  r <- suppressMessages(singlegcn.mops(d$XRanges[, 1], backend = "cpu"))
  ri <- suppressMessages(calcIntegerCopyNumbers(r))
  expect_golden(r, "single_xranges", integer = ri)
})

test_that("family wrappers check their input as cn.mops does", {
  skip_if_no_engine()
  d <- cn_data()
  expect_error(haplogcn.mops(d$X[1:200, 1:5], classes = paste0("C", 0:8)), "One element of classes must be CN1",
               fixed = TRUE)
  expect_error(referencegcn.mops(list(1), d$X[1:10, ]), "GRanges object or read count matrix needed as input.",
               fixed = TRUE)
  r <- suppressWarnings(suppressMessages(referencegcn.mops(d$X[1:200, 1:3], apply(d$X[1:200, ], 1, median),
                                                           segAlgorithm = "fast", backend = "cpu")))
  expect_identical(sampleNames(r), colnames(d$X)[1:3])
})
