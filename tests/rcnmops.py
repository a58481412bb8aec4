"""cn.mops written in R, the reference of the differential tests against R (tests/test_*_vs_r.py).

R's cn.mops is not in Debian, so it is rebuilt here stage by stage from the spec (/work/shared/spec, parts 1-3)
with R's own primitives (median, mean, quantile, var, density, lgamma, exp, log, pt, rowSums, rowMeans, IRanges),
in cn.mops's operation order; loops over regions and positions are vectorized (every element still goes through
the same double operations, so the bits are those of the per-element form), which makes cohorts of tens of
thousands of regions affordable:

- ``ref_normalize``, ``ref_coverage``: normalizeChromosomes and norm=2's coverages (part 1, sections 1 and 3);
- ``ref_em_all``: the per-region EM of cn.mops and haplocn.mops (part 1, section 2), sums as cn.mops's compiled
  code and reference BLAS form them (sequential doubles, class order);
- ``ref_onestep_all``: the one-step model of referencecn.mops and singlecn.mops (part 3), with R's long double
  rowSums/rowMeans and the column-major recycling of the prior weights;
- ``ref_stat``, ``ref_segment``: the fast segmentation (part 2, section 1);
- ``ref_calls``: segmentation per chromosome and sample, individual calls, CNVs, CNV regions (part 2, section 2);
- ``ref_integer``: calcIntegerCopyNumbers (part 2, section 3);
- ``ref_run``: a whole run of any method of the family on a matrix (rows grouped by chromosome).

Row indices handed back are 1-based; CNV and segment rows are relative to their chromosome, as cn.mops's.
"""
from __future__ import annotations

import pytest
from rdiff import r_or_skip

R_NORMALIZE = r"""
ref_mode_nonzero <- function(v) {  # the most frequent non-zero value (ties: the smallest); NA if none
  nz <- v[v != 0]
  if (!length(nz)) return(NA_real_)
  u <- sort(unique(nz))
  u[which.max(tabulate(match(nz, u), length(u)))]
}
ref_norm_group <- function(Y, chr, normType, sizeFactor, qu, quSizeFactor) {
  globalSf <- colSums(Y)
  if (any(globalSf == 0)) stop("Zero columns in readcount matrix.")
  silentLast <- NULL
  for (l in unique(chr)) {
    idx <- which(chr == l)
    Yc <- Y[idx, , drop = FALSE]
    if (all(Yc == 0)) next
    silent <- apply(Yc, 1, function(r) all(r < 1))
    silentLast <- silent
    Ys <- Yc[!silent, , drop = FALSE]
    f <- rep(1, ncol(Y))
    if (nrow(Ys) > 1) {
      sf <- if (sizeFactor == "mean") colMeans(Ys)
            else if (sizeFactor == "median" || normType == "poisson") apply(Ys, 2, median)
            else if (sizeFactor == "quant") apply(Ys, 2, quantile, probs = quSizeFactor, names = FALSE)
            else apply(Ys, 2, ref_mode_nonzero)
      if (any(is.na(sf))) sf <- globalSf
      if (any(sf == 0)) stop("Some normalization factors are zero!")
      f <- switch(normType,
                  mean = mean(sf) / sf, median = median(sf) / sf,
                  quant = quantile(sf, qu, names = FALSE) / sf,
                  mode = ref_mode_nonzero(as.vector(Ys)) / sf,
                  poisson = mean(sf) / sf)
      if (normType == "poisson") {
        Z <- t(t(Ys) * f)
        v <- apply(Z, 1, var) / apply(Z, 1, mean)
        v <- v[!is.na(v)]
        u <- quantile(v, 0.95, names = FALSE)
        d <- density(v, na.rm = TRUE, from = 0, to = u, n = u * 100)
        md <- d$x[which.max(d$y)]
        if (length(md) && is.finite(md)) f <- f / md
      }
      if (!all(is.finite(f))) f <- rep(1, ncol(Y))
    }
    Yc <- t(t(Yc) * f)
    Yc[silent, ] <- 0
    Y[idx, ] <- Yc
  }
  list(Y = Y, silent = silentLast)
}
ref_normalize <- function(X, chr, normType, sizeFactor, qu, quSizeFactor, ploidy = rep(2, ncol(X))) {
  N <- ncol(X)
  if (length(unique(ploidy)) == 1) ploidy <- rep(2, N)
  ploidy[ploidy == 0] <- 0.05
  groups <- c(2, setdiff(unique(ploidy), 2))
  out <- X
  silent <- NULL
  ref <- NA
  for (p in groups) {
    cols <- which(ploidy == p)
    if (length(cols) > 1) {
      res <- ref_norm_group(X[, cols, drop = FALSE], chr, normType, sizeFactor, qu, quSizeFactor)
      out[, cols] <- res$Y
      if (!is.null(res$silent)) silent <- res$silent
    }
    if (length(groups) == 1) break
    # the silent rows of the last chromosome normalized, recycled over the matrix (cn.mops's quirk)
    keep <- if (is.null(silent)) rep(TRUE, nrow(X)) else rep_len(!silent, nrow(X))
    med <- median(out[keep, cols])
    if (p == 2) { ref <- med; next }
    out[, cols] <- if (ref == 0 && med == 0) out[, cols] * p / 2 else out[, cols] * ref / med * p / 2
  }
  out
}
ref_coverage <- function(X) {  # norm = 2
  cov <- apply(X, 2, function(x) {
    q <- quantile(x, c(0.05, 0.95), names = FALSE)
    mean(x[x > q[1] & x < q[2]])
  })
  if (median(cov) == 0) stop("Median of the coverages is zero!")
  cov / median(cov)
}
"""

R_MODEL = r"""
ref_first_max <- function(P) {  # per element, the first class of maximal posterior (P: list of n matrices)
  best <- P[[1]]; arg <- array(1L, dim(best))
  for (i in seq_along(P)[-1]) { up <- which(P[[i]] > best); best[up] <- P[[i]][up]; arg[up] <- i }
  arg
}
ref_outputs <- function(P, I, short, idx2) {
  # sINI and INI's terms as reference BLAS's dgemv forms log2(I) %*% P: doubles, class order; INI by mean()
  sini <- 0; gain <- 0
  for (i in seq_along(I)) { sini <- sini + log2(I[i]) * P[[i]]; gain <- gain + abs(log2(I[i])) * P[[i]] }
  cn <- ref_first_max(P)
  ini <- apply(gain, 1, mean)
  sini[short, ] <- 0; cn[short, ] <- idx2; ini[short] <- 0
  post <- array(0, c(nrow(sini), length(I), ncol(sini)))
  for (i in seq_along(I)) { Pi <- P[[i]]; Pi[short, ] <- as.numeric(i == idx2); post[, i, ] <- Pi }
  list(sini = sini, cn = cn, ini = ini, post = post)
}
ref_em_all <- function(X, cov, I, idx2, priorImpact, cyc, minReadCount) {
  # cn.mops's EM for every row of X (regions x samples) at once
  X <- as.matrix(X); m <- nrow(X); N <- ncol(X); n <- length(I)
  short <- rowSums(X > minReadCount) == 0
  alpha0 <- rep(0.05, n); alpha0[idx2] <- 0.6; alpha0 <- alpha0 / sum(alpha0)
  alphaPrior <- rep(0, n); alphaPrior[idx2] <- priorImpact
  P <- sum(alphaPrior)
  Xc <- t(t(X) / cov)
  l <- apply(Xc, 1, median)
  low <- which(l < 1e-10)
  if (length(low)) l[low] <- pmax(apply(Xc[low, , drop = FALSE], 1, mean), 1)
  lambda <- matrix(0, m, n); alpha <- matrix(alpha0, m, n, byrow = TRUE)
  for (i in seq_len(n)) lambda[, i] <- l * I[i] * I[i]  # the R layer passes l*I, the C code multiplies by I
  G <- lgamma(X + 1)
  S <- 0
  for (k in seq_len(N)) S <- S + X[, k]
  S <- S / N * N
  for (cycle in seq_len(cyc)) {
    A <- vector("list", n); s <- 0
    for (i in seq_len(n)) {
      CL <- outer(lambda[, i], cov)
      a <- alpha[, i] * exp(X * log(CL) - G - CL)
      a[a < 1e-100] <- 1e-100
      A[[i]] <- a
      s <- s + a
    }
    Pp <- lapply(A, function(a) a / s)
    Tsum <- 0
    for (i in seq_len(n)) {
      acc <- 0
      for (k in seq_len(N)) { acc <- acc + Pp[[i]][, k]; Tsum <- Tsum + I[i] * Pp[[i]][, k] * cov[k] }
      alpha[, i] <- (alphaPrior[i] + acc / N) / (1 + P)
    }
    for (i in seq_len(n)) lambda[, i] <- S / Tsum * I[i]
  }
  lambda[short, ] <- 0; alpha[short, ] <- 0; alpha[short, idx2] <- 1
  c(list(lambda = lambda, alpha = alpha), ref_outputs(Pp, I, short, idx2))
}
ref_prior <- function(classes, priorImpact) {  # referencecn.mops's / singlecn.mops's class weights
  w <- rep(1, length(classes)); w[classes == "CN2"] <- 1 + priorImpact
  w / sum(w)
}
ref_onestep_all <- function(X, cov, lambda, I, idx2, prior, floor, minReadCount) {
  # the one-step model for every row of X; per region R builds the N x n matrix of likelihoods, multiplies it by
  # the prior vector (recycled in column-major order) and divides by its rowSums (long double)
  X <- as.matrix(X); m <- nrow(X); N <- ncol(X); n <- length(I)
  short <- rowSums(X > minReadCount) == 0 & lambda <= minReadCount
  G <- lgamma(X + 1)
  LC <- outer(lambda, cov)
  A <- vector("list", n)
  for (i in seq_len(n)) {
    a <- pmax(exp(X * log(LC * I[i]) - G - LC * I[i]), floor)
    A[[i]] <- a * matrix(prior[((i - 1) * N + seq_len(N) - 1) %% n + 1], m, N, byrow = TRUE)
  }
  s <- sapply(seq_len(N), function(k) rowSums(matrix(sapply(A, function(a) a[, k]), m, n)))
  s <- matrix(s, m, N)
  Pp <- lapply(A, function(a) a / s)
  alpha <- matrix(0, m, n); lam <- matrix(0, m, n)
  for (i in seq_len(n)) { alpha[, i] <- rowMeans(Pp[[i]]); lam[, i] <- lambda * I[i] }
  alpha[short, ] <- 0; alpha[short, idx2] <- 1
  c(list(lambda = lam, alpha = alpha), ref_outputs(Pp, I, short, idx2))
}
"""

R_SEGMENT = r"""
ref_stat <- function(x, eps, delta, maxInt, minSeg, cyberWeight) {
  # segment.cpp's per-position statistic (pValue, before the local maxima), in its operation order; every
  # candidate position at once, its windows growing together (a position leaves when its loop would stop)
  if (cyberWeight < 0.01) cyberWeight <- 0.01
  n <- length(x)
  S <- numeric(n); Q <- numeric(n); S[1] <- x[1]; Q[1] <- x[1] * x[1]
  for (i in seq_len(n)[-1]) { S[i] <- S[i - 1] + x[i]; Q[i] <- Q[i - 1] + x[i] * x[i] }  # doubles, not cumsum's
  mu <- 0; M2 <- 0
  for (i in seq_len(n)) { d <- x[i] - mu; mu <- mu + d / i; M2 <- M2 + d * (x[i] - mu) }
  V <- M2 / (n - 1); if (V < 1e-15) V <- 1e-15
  p <- numeric(n)
  if (n < 2) return(p)
  pos <- 0:(n - 2)
  cand <- pos[which(abs(x[pos + 2] - x[pos + 1]) > eps & pos > minSeg & pos < n - minSeg - 1)]
  best <- numeric(length(cand)); prev <- best; d <- integer(length(cand)); on <- rep(TRUE, length(cand))
  j <- minSeg
  while (j <= maxInt) {
    on <- on & d <= delta & cand + j + 1 < n & cand - j - 1 >= 0
    if (!any(on)) break
    i <- cand[on]
    nn <- j + cyberWeight - 1
    mL <- (S[i + 1] - S[i - j]) / (j + 1)
    vL <- (Q[i + 1] - Q[i - j]) - (j + 1) * mL * mL
    vL <- (vL + cyberWeight * V) / nn
    mR <- (S[i + j + 2] - S[i + 1]) / (j + 1)
    vR <- (Q[i + j + 2] - Q[i + 1]) - (j + 1) * mR * mR
    vR <- (vR + cyberWeight * V) / nn
    tt <- abs(mL - mR) / sqrt(vL / (nn + 1) + vR / (nn + 1) + 1e-15)
    a <- vL / (nn + 1); b <- vR / (nn + 1)
    dof <- (a + b) * (a + b) / ((a * a) / nn + (b * b) / nn)
    q <- suppressWarnings(-pt(tt, dof, lower.tail = FALSE, log.p = TRUE))
    up <- which(q > best[on])  # C's comparisons: false with a NaN
    best[on][up] <- q[up]
    d[on] <- ifelse(!is.na(q) & q > prev[on], 0L, d[on] + 1L)
    prev[on] <- q
    j <- j + 1L
  }
  p[cand + 1] <- best
  p
}
ref_segment <- function(x, alpha, minSeg, eps, delta, maxInt, cyberWeight) {
  # segment.R with the statistic above (segMedianT = NULL: +-2 sd(x); eps = NA: not passed)
  segMedianT <- c(2 * sd(x), -2 * sd(x))
  if (minSeg < 2) minSeg <- 2
  if (maxInt < minSeg + 5) maxInt <- minSeg + 5
  if (cyberWeight < 0) cyberWeight <- 0
  m <- length(x)
  if (is.na(eps)) eps <- quantile(abs(diff(x)), probs = 0.75)
  p <- ref_stat(x, eps, as.integer(delta), as.integer(maxInt), as.integer(minSeg), cyberWeight)
  stat <- p
  if (minSeg > 2) {  # local maxima: a position keeps its value unless a neighbour within ll is larger
    ll <- floor(minSeg / 2)
    i <- which((0:(m - 1)) - ll > 0 & (0:(m - 1)) + ll < m)
    for (j in seq_len(ll)) stat[i[p[i - j] > p[i] | p[i + j] > p[i]]] <- 0
  }
  if (alpha >= 1) {
    brk <- sort(order(stat, decreasing = TRUE)[1:as.integer(alpha)])
  } else {
    brk <- which(stat > quantile(stat, probs = 1 - alpha))
  }
  b <- c(0, brk, m)
  df <- data.frame(start = c(1, brk + 1), end = c(brk, m),
                   median = sapply(2:length(b), function(i) median(x[(b[i - 1] + 1):b[i]])))
  amp <- IRanges::reduce(IRanges::IRanges(df$start[df$median > segMedianT[1]], df$end[df$median > segMedianT[1]]))
  loss <- IRanges::reduce(IRanges::IRanges(df$start[df$median < segMedianT[2]], df$end[df$median < segMedianT[2]]))
  ir <- BiocGenerics::sort(c(amp, loss))
  ir <- ir[IRanges::width(ir) >= minSeg]
  fin <- as.data.frame(BiocGenerics::sort(c(ir, IRanges::setdiff(IRanges::IRanges(1, m), ir))))
  bi <- c(0, fin$end)
  avg <- sapply(2:length(bi), function(i) { v <- x[(bi[i - 1] + 1):bi[i]]; c(mean(v), median(v)) })
  list(p = p, start = as.numeric(fin$start), end = as.numeric(fin$end), mean = avg[1, ], median = avg[2, ])
}
"""

R_CALLS = r"""
ref_calls <- function(sini, chr, minWidth, upper, lower, useMedian) {
  # cn.mops's segAlgorithm "fast": segment every sample per chromosome (order of appearance), individual calls,
  # CNV segments, CNV regions (IRanges::reduce of the CNV rows per chromosome)
  m <- nrow(sini); N <- ncol(sini)
  if (m <= 5) return(list(calls = sini, seg = NULL, cnvr = NULL))
  calls <- sini; parts <- list()
  for (chrom in unique(chr)) {
    idx <- which(chr == chrom)
    for (k in seq_len(N)) {
      s <- ref_segment(sini[idx, k], 0.05, minWidth, NA, 20, 40, 50)
      calls[idx, k] <- rep(if (useMedian) s$median else s$mean, s$end - s$start + 1)
      parts[[length(parts) + 1]] <- data.frame(chr = chrom, first = idx[1], start = s$start, end = s$end,
                                               sample = k, median = s$median, mean = s$mean)
    }
  }
  seg <- do.call(rbind, parts)
  st <- if (useMedian) seg$median else seg$mean
  seg$cnv <- (st >= upper | st <= lower) & (seg$end - seg$start + 1 >= minWidth)
  cnv <- seg[seg$cnv, ]
  cnvr <- do.call(rbind, lapply(unique(chr), function(chrom) {
    r <- IRanges::reduce(IRanges::IRanges(cnv$start[cnv$chr == chrom], cnv$end[cnv$chr == chrom]))
    if (!length(r)) return(NULL)
    data.frame(chr = chrom, first = which(chr == chrom)[1], start = IRanges::start(r), end = IRanges::end(r))
  }))
  list(calls = calls, seg = seg, cnvr = cnvr)
}
ref_integer <- function(res, chr, grStart, grEnd, I, classes, mainClass, priorImpact, cyc, minReadCount, upper,
                        lower, useMedian, oneStep) {
  # calcIntegerCopyNumbers on ref_run's result: every CNV segment refitted on the per-sample means of its
  # (trimmed) regions; the CN of its own sample, or a threshold's neighbouring class; CNV regions take the CN
  # of each sample's first CNV in them
  seg <- res$seg; X <- res$normalized; mi <- which(classes == mainClass)
  cnvIdx <- which(seg$cnv)
  rows <- seg$first - 1 + cbind(seg$start, seg$end)
  gr <- GenomicRanges::GRanges(chr, IRanges::IRanges(grStart, grEnd))
  sg <- GenomicRanges::GRanges(seg$chr[cnvIdx], IRanges::IRanges(grStart[rows[cnvIdx, 1]], grEnd[rows[cnvIdx, 2]]))
  M <- IRanges::as.list(IRanges::findOverlaps(sg, gr))
  trim <- lapply(M, function(i) if (length(i) >= 3) i[-c(1, length(i))] else i)
  V <- t(sapply(trim, function(ii) apply(X[ii, , drop = FALSE], 2, mean)))
  V <- matrix(V, length(cnvIdx))
  fit <- if (oneStep) {
    lam <- sapply(trim, function(ii) mean(res$lambda[ii, mi]))
    ref_onestep_all(V, res$cov, lam, I, mi, ref_prior(classes, priorImpact), 1e-100, minReadCount)
  } else ref_em_all(V, res$cov, I, mi, priorImpact, cyc, minReadCount)
  cn <- rep(mainClass, nrow(seg))
  cn[cnvIdx] <- classes[fit$cn[cbind(seq_along(cnvIdx), seg$sample[cnvIdx])]]
  st <- if (useMedian) seg$median else seg$mean
  atMain <- cn == mainClass
  if (mi < length(classes)) cn[atMain & st > upper] <- classes[mi + 1]
  if (mi > 1) cn[atMain & st < lower] <- classes[mi - 1]
  regions <- res$cnvr
  labels <- matrix(mainClass, nrow(regions), ncol(res$sini))
  own <- sapply(cnvIdx, function(j) which(regions$chr == seg$chr[j] & regions$start <= seg$end[j] &
                                            regions$end >= seg$start[j])[1])
  at <- cbind(own, seg$sample[cnvIdx])
  first <- !duplicated(at)
  labels[at[first, , drop = FALSE]] <- cn[cnvIdx][first]
  list(segCN = cn, cnvrCN = labels)
}
"""

R_RUN = r"""
ref_run <- function(method, X, controls, chr, I, classes, priorImpact, cyc, norm, normType, sizeFactor, normQu,
                    quSizeFactor, upper, lower, minWidth, minReadCount, useMedian) {
  # one run of cn.mops / exomecn.mops / haplocn.mops / referencecn.mops / singlecn.mops (segAlgorithm "fast")
  N <- ncol(X); n <- length(I)
  nz <- function(Y) ref_normalize(Y, chr, normType, sizeFactor, normQu, quSizeFactor)
  if (method == "single") {
    normalized <- X; modelX <- X; cov <- 1
  } else if (method == "reference") {
    if (norm == 0) { normalized <- X; Rn <- controls; cov <- rep(1, N) }
    if (norm == 1) { both <- nz(cbind(X, controls)); normalized <- both[, 1:N, drop = FALSE]
                     Rn <- both[, -(1:N), drop = FALSE]; cov <- rep(1, N) }
    if (norm == 2) { normalized <- nz(X); covAll <- ref_coverage(cbind(X, controls)); cov <- covAll[1:N]
                     Rn <- t(t(controls) / covAll[-(1:N)]) }
    modelX <- if (norm == 1) normalized else X
  } else {
    normalized <- if (norm == 0) X else nz(X)
    modelX <- if (norm == 2) X else normalized
    cov <- if (norm == 2) ref_coverage(X) else rep(1, N)
  }
  mainClass <- if (method == "haplo") "CN1" else "CN2"
  idx2 <- which(classes == mainClass)
  fit <- if (method == "reference") {
    lam <- pmax(rowMeans(Rn), 1e-5)
    ref_onestep_all(modelX, cov, lam, I, idx2, ref_prior(classes, priorImpact), 1e-100, minReadCount)
  } else if (method == "single") {
    lam <- unsplit(lapply(split(X[, 1], factor(chr, unique(chr))), function(y) rep(median(y[y > 0]), length(y))),
                   factor(chr, unique(chr)))
    ref_onestep_all(modelX, cov, lam, I, idx2, ref_prior(classes, priorImpact), 1e-15, minReadCount)
  } else {
    ref_em_all(modelX, if (method == "haplo") rep(1, N) else cov, I, idx2, priorImpact, cyc, minReadCount)
  }
  calls <- ref_calls(fit$sini, chr, minWidth, upper, lower, useMedian)
  if (method == "single" && !is.null(calls$seg))  # singlecn.mops's CNV regions are its CNVs
    calls$cnvr <- calls$seg[calls$seg$cnv, c("chr", "first", "start", "end"), drop = FALSE]
  c(list(normalized = normalized, cov = cov), fit, calls)
}
"""

#: every R source of the reference, in dependency order
R_SOURCES = (R_NORMALIZE, R_MODEL, R_SEGMENT, R_CALLS, R_RUN)


def r_reference():
    """rpy2's ``robjects.r`` with the whole R reference defined; skips the test without R, rpy2 or IRanges /
    GenomicRanges (the segmentation and the calls need them)."""
    R = r_or_skip()
    if not R("exists('ref_run')")[0]:
        try:
            R("invisible(GenomicRanges::GRanges('a', IRanges::IRanges(1, 2)))")
        except Exception as e:  # noqa: BLE001 - rpy2 raises its own error class
            pytest.skip(f"the R reference needs IRanges and GenomicRanges: {e}")
        for src in R_SOURCES:
            R(src)
    return R
