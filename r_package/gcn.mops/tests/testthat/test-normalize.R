# normalizeChromosomes() / normalizeGenome(): cn.mops's signature; golden "normalize" case.

test_that("normalizeChromosomes reproduces cn.mops (each normType and sizeFactor; with ploidy)", {
  skip_if_no_engine()
  skip_if_no_golden("normalize")
  X <- golden_array("normalize", "input_counts")
  chr <- golden_array("normalize", "chr")
  # every normType and every sizeFactor once (the full grid is tests/test_normalization.py's, in Python)
  combos <- list(c("poisson", "mean"), c("mean", "median"), c("median", "quant"), c("quant", "mode"),
                 c("mode", "mean"), c("poisson", "mode"))
  for (ns in combos) {
    nt <- ns[1L]
    sf <- ns[2L]
    {
      gold <- golden_array("normalize", paste("norm", nt, sf, sep = "_"))
      mine <- normalizeChromosomes(X, chr = chr, normType = nt, sizeFactor = sf, qu = 0.25, quSizeFactor = 0.75)
      expect_identical(dim(mine), dim(gold))
      expect_close(mine, gold, what = paste("normalize", nt, sf))
    }
  }
  ploidy <- golden_array("normalize", "ploidy")
  gold <- golden_array("normalize", "norm_poisson_mean_ploidy")
  expect_close(normalizeChromosomes(X, chr = chr, ploidy = ploidy), gold, what = "normalize ploidy")
})

test_that("normalizeChromosomes keeps the input's type and names; normalizeGenome runs", {
  skip_if_no_engine()
  d <- cn_data()
  g <- d$XRanges[1:500, 1:6]
  ng <- normalizeChromosomes(g)
  expect_s4_class(ng, "GRanges")
  expect_identical(colnames(S4Vectors::mcols(ng)), colnames(S4Vectors::mcols(g)))
  x <- d$X[1:500, 1:6]
  nx <- normalizeChromosomes(x)
  expect_identical(dimnames(nx), dimnames(x))
  expect_close(as.matrix(as.data.frame(S4Vectors::mcols(ng))), nx, what = "GRanges vs matrix")
  expect_identical(dim(normalizeGenome(x)), dim(x))
  expect_error(normalizeChromosomes(x, normType = "bogus"), "normType")
})
