# Bad input from R: cn.mops's checks, in cn.mops's order, with cn.mops's messages.

test_that("bad input gets cn.mops's error messages", {
  skip_if_no_engine()
  d <- cn_data()
  x <- d$X[1:200, 1:6]
  expect_error(gcn.mops(data.frame(a = 1:3)), "GRanges object or read count matrix needed as input.", fixed = TRUE)
  expect_error(gcn.mops(d$XRanges[, 1]), "It is not possible to run cn.mops on only ONE sample.", fixed = TRUE)
  g <- d$XRanges[1:200, 1:3]
  BiocGenerics::strand(g) <- rep(c("+", "-"), 100)
  expect_error(gcn.mops(g), "Different strands found in GRanges object.", fixed = TRUE)
  y <- x; y[3, 2] <- -1
  expect_error(gcn.mops(y), "All values must be greater or equal zero and finite.", fixed = TRUE)
  y <- x; y[3, 2] <- NA
  expect_error(gcn.mops(y), "All values must be greater or equal zero and finite.", fixed = TRUE)
  y <- x; y[3, 2] <- Inf
  expect_error(gcn.mops(y), "All values must be greater or equal zero and finite.", fixed = TRUE)
  expect_error(gcn.mops(x, I = "a"), "\"I\" must be numeric.", fixed = TRUE)
  expect_error(gcn.mops(x, classes = 1:9), "\"classes\" must be character.", fixed = TRUE)
  expect_error(gcn.mops(x, I = c(1, 2)), "I and classes must have same length!", fixed = TRUE)
  expect_error(gcn.mops(x, classes = paste0("C", 0:8)), "One element of classes must be CN2", fixed = TRUE)
  expect_error(gcn.mops(x, priorImpact = c(1, 2)), "\"priorImpact\" be must numeric and of length 1.", fixed = TRUE)
  expect_error(gcn.mops(x, cyc = "a"), "\"cyc\" must be numeric and of length 1.", fixed = TRUE)
  expect_error(gcn.mops(x, normType = "foo"), "Set normalization to \"mean\"", fixed = TRUE)
  expect_error(gcn.mops(x, norm = 3), "\"norm\" must be 0,1 or 2.", fixed = TRUE)
  expect_error(gcn.mops(x, minWidth = NULL), "\"minWidth\" must be numeric and of length 1.", fixed = TRUE)
  expect_error(gcn.mops(x, segAlgorithm = 1), "\"segAlgorithm\" must be \"fastseg\" or \"DNAcopy\"!", fixed = TRUE)
  expect_error(gcn.mops(x, minReadCount = "5"), "\"minReadCount\" must be numeric and of length 1.", fixed = TRUE)
  expect_error(gcn.mops(x, returnPosterior = "yes"), "\"returnPosterior\" must be logical.", fixed = TRUE)
  expect_error(gcn.mops(x, backend = "tpu"), "\"backend\" must be", fixed = TRUE)
  # errors the engine finds come back as plain R errors, with the engine's message
  expect_error(suppressMessages(gcn.mops(x, sizeFactor = "bogus")), "sizeFactor")
  y <- x; y[3, 2] <- 2^53 + 2
  expect_error(suppressMessages(gcn.mops(y)), "at region 3, sample 2 (", fixed = TRUE)
  expect_error(suppressMessages(gcn.mops(y)), "exceeds 2^53 (9007199254740992)", fixed = TRUE)
  expect_error(suppressMessages(singlegcn.mops(x)), "More than one sample detected (6 sample columns)", fixed = TRUE)
  # an unknown extra argument: the pipeline's check (the segmentation's and DNAcopy's names pass through)
  expect_error(suppressMessages(gcn.mops(x, foo = 1)), "Unknown argument(s) 'foo'", fixed = TRUE)
  expect_warning(suppressMessages(gcn.mops(d$X[1:50, 1:5])),
                 "Normalization might not be applicable for this small number of segments.", fixed = TRUE)
})

test_that("bit64::integer64 counts are read as their numbers, not their bits", {
  skip_if_not_installed("bit64")
  x <- matrix(as.double(rpois(60, 50)), 20, 3, dimnames = list(NULL, c("a", "b", "c")))
  x64 <- bit64::as.integer64(x)
  dim(x64) <- dim(x)
  dimnames(x64) <- dimnames(x)
  expect_identical(gcn.mops:::.prepare_input(x64)$X, gcn.mops:::.prepare_input(x)$X)
  g <- GenomicRanges::GRanges("chr1", IRanges::IRanges(seq(1, by = 1000, length.out = 20), width = 1000))
  S4Vectors::mcols(g) <- S4Vectors::DataFrame(a = x64[, 1], b = x64[, 2], c = x64[, 3])
  expect_identical(unname(gcn.mops:::.prepare_input(g)$X), unname(x))
  x64[2, 2] <- bit64::as.integer64("9007199254740993")
  expect_error(gcn.mops:::.prepare_input(x64), "exceeds 2^53", fixed = TRUE)
})
