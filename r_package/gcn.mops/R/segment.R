# segment(): cn.mops's fast segmentation of a numeric vector (engine: gcnmops.segmentation.cpu.segment on
# a view of x). eps not given: the 0.75 quantile of |diff(x)| (cn.mops's rule); segMedianT not given:
# +-2 sd(x).

segment <- function(x, alpha = 0.05, segMedianT, minSeg = 3, eps = 0, delta = 20, maxInt = 40,
                    cyberWeight = 50) {
  if (!(is.numeric(x) || is.logical(x))) stop("x must be numeric.")
  for (a in c("alpha", "minSeg", "delta", "maxInt", "cyberWeight")) {
    v <- get(a)
    if (!is.numeric(v) || length(v) != 1L) stop(sprintf("\"%s\" must be numeric and of length 1.", a))
  }
  env <- new.env(parent = emptyenv())
  env$x <- as.double(x)
  env$alpha <- alpha
  env$segMedianT <- if (missing(segMedianT) || is.null(segMedianT)) NULL else as.double(segMedianT)
  env$minSeg <- minSeg
  env$eps <- if (missing(eps)) NULL else as.double(eps)
  env$delta <- delta
  env$maxInt <- maxInt
  env$cyberWeight <- cyberWeight
  .call_engine("segment_from_r", env)
  data.frame(start = env$start, end = env$end, mean = env$mean, median = env$median)
}
