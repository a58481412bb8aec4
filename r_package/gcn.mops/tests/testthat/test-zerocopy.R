# The zero-copy claims: the engine reads the R matrix in place and writes its results into matrices
# allocated by R; the result's slots are those very matrices (same data address, no intermediate copy).

test_that("input viewed in place; model outputs written into R memory; slots are those matrices", {
  skip_if_no_engine()
  d <- cn_data()
  y <- d$X[1:2000, ] * 1.0          # a double matrix of the user's
  dimnames(y) <- list(NULL, colnames(d$X))
  addr_y <- gcn.mops:::.address(y)
  traced <- capabilities("profmem")
  if (traced) tracemem(y)
  out <- utils::capture.output(r <- suppressMessages(gcn.mops(y, norm = 0, returnPosterior = TRUE)))
  if (traced) {
    untracemem(y)
    expect_false(any(grepl("tracemem", out)), info = "the input matrix was duplicated")
  }
  run <- gcn.mops:::.state$last_run
  expect_identical(run$addresses$X, addr_y)          # the bridge hands the engine the user's matrix
  expect_identical(run$addresses$X_engine, addr_y)   # the engine's count matrix is that memory
  # the model wrote into the R-allocated matrices, and the result's slots are those matrices
  expect_identical(gcn.mops:::.address(r@localAssessments), run$addresses$localAssessments)
  expect_identical(gcn.mops:::.address(r@iniCall), run$addresses$iniCall)
  expect_identical(gcn.mops:::.address(r@posteriorProbs), run$addresses$posteriorProbs)
  expect_identical(gcn.mops:::.address(r@params$L), run$addresses$L)
  expect_identical(gcn.mops:::.address(r@params$A), run$addresses$A)
  # norm = 0: the normalizedData slot is the input matrix itself
  expect_identical(gcn.mops:::.address(r@normalizedData), addr_y)
  # nothing of the model's outputs went through a copy (the individual calls are copied once, by design)
  expect_true(all(unlist(run$copied) %in% c("individualCall", "normalizedData")))
  expect_false(any(c("L", "A", "localAssessments", "iniCall", "cn", "posteriorProbs") %in% unlist(run$copied)))
})
