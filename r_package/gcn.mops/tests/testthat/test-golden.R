# The remaining golden cases of cn.mops() (inputs rebuilt from the golden files), slot by slot.

golden_call_args <- function(case) {
  p <- manifest(case)$params
  if (is.null(p) || length(p) == 0L) return(list())
  lapply(p, function(v) if (is.list(v)) unlist(v) else v)
}

for (case in c("synth3chr_default", "synth3chr_norm2_median", "xranges_params", "xranges_5classes")) {
  local({
    case <- case
    test_that(paste("golden case", case), {
      skip_if_no_engine()
      skip_if_no_golden(case)
      input <- golden_input(case)
      r <- suppressMessages(do.call(gcn.mops, c(list(input), golden_call_args(case))))
      ri <- if ("cnvr_integer" %in% names(manifest(case)$tables)) suppressMessages(calcIntegerCopyNumbers(r))
      expect_golden(r, case, integer = ri)
    })
  })
}
